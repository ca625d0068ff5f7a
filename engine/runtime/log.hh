// The probe's log: what a running probe says besides its status line and
// summary (it started, where its control socket is, a reload's outcome, an
// error met while running), each message with a level, through spdlog.
//
// On a terminal the lines read as they always did ("sluice: warning: ...").
// Elsewhere (a file, a pipe) each line starts with the time, ISO 8601 UTC
// to the millisecond. Under systemd, when stderr is the journal's stream
// ($JOURNAL_STREAM), messages go to the journal with their priority
// (journalctl -p warning) and no time of their own: the journal keeps one.
//
// No spdlog here: elements include this and are also built to bitcode.
#pragma once
#include <string>

namespace sluice::log {

enum class Level { Debug, Info, Warning, Error };

// Once, before the first message; until then Info and above go to stderr as
// on a terminal. min: the least level written.
void setup(Level min);
// "debug", "info", "warning" or "error"; false for another word.
bool parse_level(const std::string &word, Level *out);

void debug(const std::string &message);
void info(const std::string &message);
void warning(const std::string &message);
void error(const std::string &message);

}  // namespace sluice::log
