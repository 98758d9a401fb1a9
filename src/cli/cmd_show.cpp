// faultline show | markdown | sentry | explain: one report, rendered.
#include "cli/cmd_show.h"

#include <fmt/format.h>

#include <functional>
#include <memory>

#include "cli/report_input.h"
#include "report/markdown.h"
#include "report/render.h"
#include "report/sentry.h"

namespace faultline::cli {

namespace {

struct ShowArgs {
  std::string path;
  std::string color = "auto";
  bool faulthandler = false;
};

struct SentryArgs {
  std::string path;
  bool envelope = false;
};

// Loads REPORT and prints what `render` makes of it; returns the exit status.
int render_report(const std::string& path,
                  const std::function<std::string(const report::Report&)>& render) {
  auto r = load_or_complain(path);
  if (!r) return kExitFailed;
  return print_out(render(*r)) ? kExitOk : kExitFailed;
}

void add_report_argument(CLI::App* sub, std::string& path) {
  sub->add_option("REPORT", path, "a faultline/1 report (JSON file; - reads standard input)")
      ->required();
}

}  // namespace

void add_show_commands(CLI::App& app, int& status) {
  auto show = std::make_shared<ShowArgs>();
  CLI::App* s = app.add_subcommand(
      "show", "Print a report for people: signal, diagnosis, then every thread's frames");
  add_report_argument(s, show->path);
  s->add_option("--color", show->color,
                "colors: auto (on a terminal, unless NO_COLOR is set), always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  s->add_flag("--faulthandler", show->faulthandler,
              "print exactly CPython faulthandler's layout (Python frames only)");
  s->callback([show, &status] {
    status = render_report(show->path, [&](const report::Report& r) {
      return show->faulthandler
                 ? report::render_faulthandler(r)
                 : report::render_text(r, report::TextOptions{want_color(show->color), ""});
    });
  });

  auto md_path = std::make_shared<std::string>();
  auto md_limit = std::make_shared<size_t>(60000);
  CLI::App* m = app.add_subcommand(
      "markdown", "Print a GitHub issue body (GitHub-flavoured Markdown, under 60 KB)");
  add_report_argument(m, *md_path);
  m->add_option("--max-bytes", *md_limit, "size limit of the body in bytes")
      ->check(CLI::Range(size_t{1000}, size_t{1} << 20))
      ->capture_default_str();
  m->callback([md_path, md_limit, &status] {
    status = render_report(*md_path, [&](const report::Report& r) {
      return report::render_markdown(r, report::MarkdownOptions{*md_limit});
    });
  });

  auto sentry = std::make_shared<SentryArgs>();
  CLI::App* se = app.add_subcommand(
      "sentry", "Print a Sentry event (JSON) for the report, or an envelope with --envelope");
  add_report_argument(se, sentry->path);
  se->add_flag("--envelope", sentry->envelope,
               "print a Sentry envelope (for POST /api/<project>/envelope/) instead of the event");
  se->callback([sentry, &status] {
    status = render_report(sentry->path, [&](const report::Report& r) {
      return sentry->envelope ? report::sentry_envelope(r) : report::sentry_event(r).dump(2) + "\n";
    });
  });

  auto ex_path = std::make_shared<std::string>();
  CLI::App* e = app.add_subcommand("explain", "Explain a report: its diagnosis and any hints");
  add_report_argument(e, *ex_path);
  e->callback([ex_path, &status] { status = render_report(*ex_path, report::render_explain); });
}

}  // namespace faultline::cli
