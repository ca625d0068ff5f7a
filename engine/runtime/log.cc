#include "engine/runtime/log.hh"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace sluice::log {

namespace {

std::mutex setup_mutex;
std::shared_ptr<spdlog::logger> the_logger;
bool to_journal = false;

// systemd connects stderr to the journal and says so with
// JOURNAL_STREAM=DEV:INODE; only if stderr is still that stream (not
// redirected by a script in between).
bool stderr_is_journal() {
  const char *js = getenv("JOURNAL_STREAM");
  struct stat st {};
  if (!js || fstat(STDERR_FILENO, &st) != 0) return false;
  unsigned long long dev = 0, ino = 0;
  return sscanf(js, "%llu:%llu", &dev, &ino) == 2 && dev == st.st_dev && ino == st.st_ino;
}

spdlog::level::level_enum spd(Level l) {
  switch (l) {
    case Level::Debug: return spdlog::level::debug;
    case Level::Info: return spdlog::level::info;
    case Level::Warning: return spdlog::level::warn;
    case Level::Error: return spdlog::level::err;
  }
  return spdlog::level::info;
}

std::shared_ptr<spdlog::logger> make(Level min) {
  std::shared_ptr<spdlog::logger> logger;
  to_journal = stderr_is_journal();
  if (to_journal) {
    logger = std::make_shared<spdlog::logger>("sluice", std::make_shared<spdlog::sinks::systemd_sink_mt>("sluice"));
    logger->set_pattern("%v");
  } else {
    logger = std::make_shared<spdlog::logger>("sluice", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    if (isatty(STDERR_FILENO)) logger->set_pattern("%v");
    else logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %v", spdlog::pattern_time_type::utc);
  }
  logger->set_level(spd(min));
  logger->flush_on(spdlog::level::debug);  // every line as it comes: a crash keeps what was said
  return logger;
}

spdlog::logger &logger() {
  std::lock_guard lock(setup_mutex);
  if (!the_logger) the_logger = make(Level::Info);
  return *the_logger;
}

// The words a reader of the terminal knows; the journal has the priority.
void write(Level level, const std::string &message) {
  spdlog::logger &l = logger();
  const char *tag = level == Level::Warning ? "warning: " : level == Level::Error ? "error: " : "";
  l.log(spd(level), "{}{}{}", to_journal ? "" : "sluice: ", tag, message);
}

}  // namespace

void setup(Level min) {
  std::lock_guard lock(setup_mutex);
  the_logger = make(min);
}

bool parse_level(const std::string &word, Level *out) {
  if (word == "debug") *out = Level::Debug;
  else if (word == "info") *out = Level::Info;
  else if (word == "warning") *out = Level::Warning;
  else if (word == "error") *out = Level::Error;
  else return false;
  return true;
}

void debug(const std::string &m) { write(Level::Debug, m); }
void info(const std::string &m) { write(Level::Info, m); }
void warning(const std::string &m) { write(Level::Warning, m); }
void error(const std::string &m) { write(Level::Error, m); }

}  // namespace sluice::log
