// The one description of shardscope-cli's commands and options. The parser
// (CliArgs), `--help`/`help COMMAND`, the man pages and the bash completion are
// all made from it, so that none of them can drift from what the CLI accepts.
//
// Why not CLI11 or QCommandLineParser: every command already reads its options
// through CliArgs (value/flag/integer/number, with range errors naming the
// option) and checks the combinations itself (--suite vs --plan, --engine vs
// --fit, ...). What was missing is a table of the options with their help, which
// neither library can turn into a man page or a completion script; QCommandLineParser
// has no subcommands and no "did you mean", and CLI11 would mean rewriting every
// command's parsing and its error messages (which the tests check) for features
// we do not use. So the table is ours and CliArgs is kept, reading its option
// sets from the table.
#pragma once

#include <string>
#include <vector>

namespace shardscope::cli {

// What an option's value is, for completion (and the man page's wording).
enum class ValueKind {
    Flag,       // no value
    Text,       // free text, numbers
    File,       // a file path
    Model,      // a catalog model name, or a model JSON file
    Node,       // a catalog node type name
    Chip,       // a catalog chip name (optionally NAME:scale)
    Choice,     // one of `choices`
};

struct OptionHelp {
    std::string name;        // without the leading "--"
    std::string value;       // the value's placeholder ("N", "NAME|FILE"); empty for a flag
    std::string help;        // one sentence, lower case, no final period
    std::string def;         // the default as shown ("10"); empty: no default (or required)
    ValueKind kind = ValueKind::Text;
    std::vector<std::string> choices;  // for ValueKind::Choice
    bool required = false;
    bool hidden = false;     // accepted (to refuse it with a better message) but not documented

    bool flag() const { return kind == ValueKind::Flag; }
};

struct CommandHelp {
    std::string name;                  // "plan", "catalog list"
    std::string summary;               // one line for the command list
    std::vector<std::string> usage;    // synopsis lines, without "shardscope-cli "
    std::string description;           // a paragraph
    std::vector<OptionHelp> options;
    std::vector<std::string> examples; // command lines, without "shardscope-cli "
    ValueKind positional = ValueKind::Flag;  // what its positional argument completes to (Flag: none)
};

// Every command, in the order of the global help. "catalog" is a group: its verbs are
// "catalog list", "catalog show", ...
const std::vector<CommandHelp>& commandHelps();
// The command named `name` ("plan", "catalog list"); nullptr when there is none.
const CommandHelp* findCommandHelp(const std::string& name);
// Like findCommandHelp, for a name the code knows exists.
const CommandHelp& commandHelp(const std::string& name);
// The options every command takes (--db), and the ones only before a command.
const std::vector<OptionHelp>& globalOptions();

// The names of the commands, or of the catalog's verbs (group = "catalog").
std::vector<std::string> commandNames(const std::string& group = {});

// Texts made from the table.
std::string mainHelpText();
// The synopsis lines of a command, for usage errors ("shardscope-cli plan --model ...").
std::string usageText(const CommandHelp& command);
std::string commandHelpText(const CommandHelp& command);
// `help catalog`: the verbs of the catalog with their usage.
std::string groupHelpText(const std::string& group);
// Man pages (roff) of shardscope-cli and of the GUI, shardscope.
std::string cliManPage(const std::string& version, const std::string& date);
std::string guiManPage(const std::string& version, const std::string& date);
// A bash completion script for shardscope-cli.
std::string bashCompletion();

// The GUI's options (shardscope), for its QCommandLineParser and its man page.
const std::vector<OptionHelp>& guiOptions();

} // namespace shardscope::cli
