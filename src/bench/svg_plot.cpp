#include "bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "util/error.h"

namespace dflash::bench {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

std::string label(double v) {
  char b[32];
  if (std::fabs(v) >= 100 || v == std::floor(v)) std::snprintf(b, sizeof b, "%.0f", v);
  else if (std::fabs(v) >= 10) std::snprintf(b, sizeof b, "%.1f", v);
  else std::snprintf(b, sizeof b, "%.2g", v);
  return b;
}

// A "nice" tick step (1, 2 or 5 x 10^n) giving about `want` ticks over span.
double nice_step(double span, int want) {
  if (!(span > 0)) return 1;
  const double raw = span / want, p = std::pow(10.0, std::floor(std::log10(raw))), f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

const char* kColors[] = {"#d62728", "#1f77b4", "#555555", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"};

void panel_svg(std::ostringstream& o, const PlotPanel& p, double ox, double oy, double w, double h) {
  const double l = ox + 60, r = ox + w - 16, t = oy + 34, b = oy + h - 44;
  double x0 = 1e300, x1 = -1e300, y1 = 0;
  for (const auto& s : p.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]), y1 = std::max(y1, s.y[i]);
    }
  if (x0 > x1) x0 = 0, x1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (!(y1 > 0)) y1 = 1;
  const double ys = nice_step(y1, 5);
  y1 = std::ceil(y1 * 1.05 / ys) * ys;
  auto X = [&](double v) { return l + (v - x0) / (x1 - x0) * (r - l); };
  auto Y = [&](double v) { return b - v / y1 * (b - t); };
  o << "<g class=\"panel\">\n";
  o << "<text x=\"" << num(ox + w / 2) << "\" y=\"" << num(oy + 20)
    << "\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">" << esc(p.title) << "</text>\n";
  o << "<rect x=\"" << num(l) << "\" y=\"" << num(t) << "\" width=\"" << num(r - l) << "\" height=\"" << num(b - t)
    << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (double v = 0; v <= y1 + ys / 2; v += ys) {
    o << "<line x1=\"" << num(l) << "\" y1=\"" << num(Y(v)) << "\" x2=\"" << num(r) << "\" y2=\"" << num(Y(v))
      << "\" stroke=\"#e5e5e5\"/>\n";
    o << "<text x=\"" << num(l - 6) << "\" y=\"" << num(Y(v) + 4) << "\" text-anchor=\"end\" font-size=\"11\">"
      << label(v) << "</text>\n";
  }
  // x ticks at the data's own x values (block sizes, batch sizes).
  std::vector<double> xs;
  for (const auto& s : p.series) xs.insert(xs.end(), s.x.begin(), s.x.end());
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  double last = -1e300;
  for (double v : xs) {
    if (!std::isfinite(v) || X(v) - last < 18) continue;
    last = X(v);
    o << "<text x=\"" << num(X(v)) << "\" y=\"" << num(b + 16) << "\" text-anchor=\"middle\" font-size=\"11\">"
      << label(v) << "</text>\n";
  }
  o << "<text x=\"" << num((l + r) / 2) << "\" y=\"" << num(b + 34) << "\" text-anchor=\"middle\" font-size=\"12\">"
    << esc(p.xlabel) << "</text>\n";
  o << "<text x=\"" << num(ox + 14) << "\" y=\"" << num((t + b) / 2) << "\" text-anchor=\"middle\" font-size=\"12\" "
    << "transform=\"rotate(-90 " << num(ox + 14) << " " << num((t + b) / 2) << ")\">" << esc(p.ylabel) << "</text>\n";
  int k = 0;
  for (const auto& s : p.series) {
    const std::string color = s.color.empty() ? kColors[k % std::size(kColors)] : s.color;
    std::string pts;
    std::vector<std::pair<double, double>> xy;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) xy.emplace_back(X(s.x[i]), Y(s.y[i]));
    for (const auto& [px, py] : xy) pts += (pts.empty() ? "" : " ") + num(px) + "," + num(py);
    o << "<polyline class=\"series\" data-series=\"" << esc(s.name) << "\" points=\"" << pts
      << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\"" << (s.dashed ? " stroke-dasharray=\"6,4\"" : "")
      << "/>\n";
    for (const auto& [px, py] : xy)
      o << "<circle class=\"marker\" cx=\"" << num(px) << "\" cy=\"" << num(py) << "\" r=\"3\" fill=\"" << color << "\"/>\n";
    const double ly = t + 14 + 16 * k;
    o << "<line x1=\"" << num(l + 10) << "\" y1=\"" << num(ly - 4) << "\" x2=\"" << num(l + 30) << "\" y2=\""
      << num(ly - 4) << "\" stroke=\"" << color << "\" stroke-width=\"2\""
      << (s.dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>\n";
    o << "<text class=\"legend\" x=\"" << num(l + 36) << "\" y=\"" << num(ly) << "\" font-size=\"11\">" << esc(s.name)
      << "</text>\n";
    ++k;
  }
  o << "</g>\n";
}

double at(const nlohmann::json& obj, const std::string& key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return NAN;
  return obj[key].get<double>();
}

// forward_ms {"1": .., "2": ..} -> (K, ms[K] / ms[1]) in increasing K.
PlotSeries ratio_series(const std::string& name, const nlohmann::json& ms, const std::string& color, bool dashed) {
  PlotSeries s{name, color, {}, {}, dashed};
  if (!ms.is_object()) return s;
  std::vector<std::pair<int, double>> kv;
  for (auto it = ms.begin(); it != ms.end(); ++it)
    if (it.value().is_number()) kv.emplace_back(std::stoi(it.key()), it.value().get<double>());
  std::sort(kv.begin(), kv.end());
  const double base = at(ms, "1");
  for (auto& [K, v] : kv) {
    s.x.push_back(K);
    s.y.push_back(base > 0 ? v / base : NAN);
  }
  return s;
}

std::vector<int> block_sizes(const nlohmann::json& m) {
  std::vector<int> b;
  if (m.is_object())
    for (auto it = m.begin(); it != m.end(); ++it) b.push_back(std::stoi(it.key()));
  std::sort(b.begin(), b.end());
  return b;
}

}  // namespace

std::string render_svg(const std::string& title, const std::vector<PlotPanel>& panels) {
  const double pw = 520, ph = 340, top = 36;
  const int cols = panels.size() > 1 ? 2 : 1, rows = int((panels.size() + 1) / 2);
  const double W = pw * cols, H = top + ph * std::max(rows, 1);
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(W) << "\" height=\"" << num(H) << "\" viewBox=\"0 0 "
    << num(W) << " " << num(H) << "\" font-family=\"sans-serif\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << num(W / 2) << "\" y=\"24\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">" << esc(title)
    << "</text>\n";
  for (size_t i = 0; i < panels.size(); ++i)
    panel_svg(o, panels[i], pw * double(i % 2), top + ph * double(i / 2), pw, ph);
  o << "</svg>\n";
  return o.str();
}

namespace {

bool is_concurrency_doc(const nlohmann::json& doc) {
  return doc.is_object() && doc.value("bench", std::string()) == "concurrency";
}

// bench --concurrency: aggregate tok/s against streams (end to end, and while all streams
// decode), llama.cpp beside; and speculative over plain, the paired medians, against 1.
void concurrency_panels(const nlohmann::json& doc, std::vector<PlotPanel>& panels) {
  PlotPanel tps{"aggregate throughput vs streams", "streams", "tok/s", {}};
  PlotPanel ratio{"speculative / plain (paired median)", "streams", "dflash / plain", {}};
  PlotSeries plain{"plain", "#555555", {}, {}, false}, plain_steady{"plain, all decoding", "#555555", {}, {}, true},
      spec{"dflash", "#d62728", {}, {}, false}, spec_steady{"dflash, all decoding", "#d62728", {}, {}, true},
      r_all{"end to end", "#d62728", {}, {}, false}, r_steady{"all decoding", "#d62728", {}, {}, true},
      one{"equal", "#555555", {}, {}, true};
  for (const auto& lv : doc["levels"]) {
    const double n = at(lv, "streams");
    if (lv.contains("plain")) plain.x.push_back(n), plain.y.push_back(at(lv["plain"], "aggregate_tok_s"));
    if (lv.contains("plain_steady_tok_s_best")) plain_steady.x.push_back(n), plain_steady.y.push_back(at(lv, "plain_steady_tok_s_best"));
    if (!lv.contains("dflash")) continue;
    spec.x.push_back(n), spec.y.push_back(at(lv["dflash"], "aggregate_tok_s"));
    if (lv.contains("dflash_steady_tok_s_best")) spec_steady.x.push_back(n), spec_steady.y.push_back(at(lv, "dflash_steady_tok_s_best"));
    r_all.x.push_back(n), r_all.y.push_back(at(lv, "dflash_over_plain_paired_median"));
    if (lv.contains("dflash_over_plain_steady_paired_median"))
      r_steady.x.push_back(n), r_steady.y.push_back(at(lv, "dflash_over_plain_steady_paired_median"));
    one.x.push_back(n), one.y.push_back(1.0);
  }
  for (auto* s : {&plain, &plain_steady, &spec, &spec_steady})
    if (!s->x.empty()) tps.series.push_back(std::move(*s));
  if (doc.contains("llamacpp") && doc["llamacpp"].contains("levels")) {
    PlotSeries l{"llama.cpp", "#1f77b4", {}, {}, false};
    for (const auto& lv : doc["llamacpp"]["levels"]) l.x.push_back(at(lv, "streams")), l.y.push_back(at(lv, "aggregate_tok_s"));
    if (!l.x.empty()) tps.series.push_back(std::move(l));
  }
  if (!tps.series.empty()) panels.push_back(std::move(tps));
  if (!r_all.x.empty()) {
    ratio.series.push_back(std::move(r_all));
    if (!r_steady.x.empty()) ratio.series.push_back(std::move(r_steady));
    ratio.series.push_back(std::move(one));
    panels.push_back(std::move(ratio));
  }
}

}  // namespace

std::vector<PlotPanel> bench_plot_panels(const nlohmann::json& doc) {
  std::vector<PlotPanel> panels;
  if (doc.is_array()) {  // bench --vs-llamacpp rows
    for (const auto& row : doc) {
      if (!row.is_object() || !row.contains("dflash")) continue;
      PlotPanel p{row.value("model", std::string("?")) + " " + row.value("quant", std::string("")) + ", " +
                      std::to_string(row.value("threads", 0)) + " threads",
                  "K (tokens in one forward)", "forward(K) / forward(1)", {}};
      p.series.push_back(ratio_series("dflash", row["dflash"].value("forward_ms", nlohmann::json()), "#d62728", false));
      if (row.contains("llamacpp"))
        p.series.push_back(ratio_series("llama.cpp", row["llamacpp"].value("forward_ms", nlohmann::json()), "#1f77b4", false));
      if (row.contains("bound_ms"))
        p.series.push_back(ratio_series("physical bound", row["bound_ms"], "#555555", true));
      panels.push_back(std::move(p));
    }
  } else if (doc.is_object() && doc.contains("regimes")) {  // bench --draft
    if (doc.contains("cost_model") && doc["cost_model"].is_array()) {
      PlotPanel p{"verification cost (target)", "K (rows in one forward)", "time / forward(1)", {}};
      PlotSeries v{"target forward(K) / forward(1)", "#d62728", {}, {}, false}, d{"draft block / forward(1)", "#2ca02c", {}, {}, true};
      for (const auto& c : doc["cost_model"]) {
        const double K = at(c, "K");
        v.x.push_back(K), v.y.push_back(at(c, "ratio"));
        if (K >= 2) d.x.push_back(K), d.y.push_back(at(c, "draft_ratio"));
      }
      p.series.push_back(std::move(v));
      if (!d.x.empty()) p.series.push_back(std::move(d));
      panels.push_back(std::move(p));
    }
    PlotPanel tps{"decode speed vs block size", "block size", "tok/s", {}};
    PlotPanel sp{"speedup over plain decoding vs block size", "block size", "speedup (x)", {}};
    for (const auto& r : doc["regimes"]) {
      const std::string name = r.value("regime", std::string("?"));
      for (const char* key : {"dflash", "draft2"}) {
        if (!r.contains(key)) continue;
        const std::string tag = std::string(key) == "dflash" ? "" : " (draft2)";
        PlotSeries a{name + tag, "", {}, {}, tag.size() > 0}, s{name + tag, "", {}, {}, tag.size() > 0};
        for (int B : block_sizes(r[key])) {
          const auto& e = r[key][std::to_string(B)];
          a.x.push_back(B), a.y.push_back(at(e, "tok_s"));
          s.x.push_back(B), s.y.push_back(at(e, "speedup"));
        }
        if (std::string(key) == "dflash" && r.contains("plain_tok_s") && !a.x.empty())
          tps.series.push_back(PlotSeries{name + " plain", "#555555", {a.x.front(), a.x.back()},
                                          {at(r, "plain_tok_s"), at(r, "plain_tok_s")}, true});
        tps.series.push_back(std::move(a));
        sp.series.push_back(std::move(s));
      }
    }
    if (!tps.series.empty()) panels.push_back(std::move(tps));
    if (!sp.series.empty()) panels.push_back(std::move(sp));
  } else if (is_concurrency_doc(doc) && doc.contains("levels")) {
    concurrency_panels(doc, panels);
  }
  return panels;
}

void write_bench_plot(const nlohmann::json& doc, const std::string& path) {
  const auto panels = bench_plot_panels(doc);
  if (panels.empty()) throw Error("plot: the bench document has nothing to plot (" + path + ")");
  const std::string title = doc.is_array()            ? "dflash vs llama.cpp: verification cost curve"
                            : is_concurrency_doc(doc) ? "dflash bench --concurrency: batched streams"
                                          : "DFlash block-size sweep";
  std::ofstream f(path, std::ios::binary);
  if (!f) throw file_error(path, "cannot write");
  f << render_svg(title, panels);
  if (!f) throw file_error(path, "write failed");
}

void save_bench_outputs(const nlohmann::json& doc, const std::string& json_out, const std::string& plot_in) {
  std::string plot = plot_in;
  if (!json_out.empty()) {
    std::ofstream f(json_out, std::ios::binary);
    if (!f) throw file_error(json_out, "cannot write");
    f << doc.dump(2) << "\n";
    if (!f) throw file_error(json_out, "write failed");
    if (plot.empty()) {
      const size_t dot = json_out.rfind('.'), slash = json_out.rfind('/');
      const bool ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
      plot = (ext ? json_out.substr(0, dot) : json_out) + ".svg";
    }
  }
  if (plot.empty()) return;
  write_bench_plot(doc, plot);
  std::fprintf(stderr, "wrote %s%s%s\n", json_out.empty() ? "" : (json_out + " and ").c_str(), plot.c_str(), "");
}

void replot_bench(const std::string& json_in, const std::string& plot) {
  if (plot.empty()) throw Error("--plot-from needs --plot FILE.svg");
  std::ifstream f(json_in, std::ios::binary);
  if (!f) throw file_error(json_in, "cannot read");
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(ss.str());
  } catch (const std::exception& e) {
    throw file_error(json_in, std::string("not JSON: ") + e.what());
  }
  write_bench_plot(doc, plot);
}

}  // namespace dflash::bench
