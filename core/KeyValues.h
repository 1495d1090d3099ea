// "key=value,key=value" lists as the command line and the GUI write layouts and
// constraints ("tp=8,pp=2,sp=on"): split, trimmed, with malformed items reported.
#pragma once

#include "FieldError.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardscope {

std::string trimmedSpaces(std::string_view s);
// The whole text is a decimal integer (no sign other than '-', no trailing characters).
bool parseWholeInt(std::string_view text, int& out);
// Items without '=' are errors under `path` ("\"tp\" is not key=value"), and so is a key given
// twice ("tp=2,tp=4": path.tp); empty items are skipped.
std::vector<std::pair<std::string, std::string>> splitKeyValues(const std::string& text, const std::string& path,
                                                                FieldErrors& errors);

} // namespace shardscope
