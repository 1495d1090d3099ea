// shardscope-docgen: writes the man pages and the bash completion from the one
// description of the commands (CommandHelp.h). Run by the build, not installed.
//   shardscope-docgen cli-man|gui-man|bash-completion OUTPUT
#include "BuildInfo.h"
#include "CommandHelp.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

int main(int argc, char** argv)
{
    using namespace shardscope;
    if (argc != 3) {
        std::cerr << "usage: shardscope-docgen cli-man|gui-man|bash-completion OUTPUT\n";
        return 2;
    }
    const std::string what = argv[1];
    std::string text;
    if (what == "cli-man")
        text = cli::cliManPage(kPackageVersion, kGitDate);
    else if (what == "gui-man")
        text = cli::guiManPage(kPackageVersion, kGitDate);
    else if (what == "bash-completion")
        text = cli::bashCompletion();
    else {
        std::cerr << "shardscope-docgen: unknown output \"" << what << "\"\n";
        return 2;
    }
    // Written beside and renamed, so that a failed run leaves no half file for make to trust.
    const std::string out = argv[2], tmp = out + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f << text;
        if (!f.flush()) {
            std::cerr << "shardscope-docgen: cannot write " << tmp << "\n";
            return 1;
        }
    }
    if (std::rename(tmp.c_str(), out.c_str()) != 0) {
        std::cerr << "shardscope-docgen: cannot rename " << tmp << " to " << out << "\n";
        return 1;
    }
    return 0;
}
