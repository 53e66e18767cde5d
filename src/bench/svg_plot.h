#pragma once
// A small SVG line-chart writer (no dependency) for the bench pictures: the verification cost
// curve of `bench --vs-llamacpp`, the block-size sweep of `bench --draft` and the scaling of
// `bench --concurrency`.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dflash::bench {

struct PlotSeries {
  std::string name, color;
  std::vector<double> x, y;
  bool dashed = false;
};

struct PlotPanel {
  std::string title, xlabel, ylabel;
  std::vector<PlotSeries> series;
};

// One SVG document: the panels in a grid of two columns. Each series is one
// <polyline class="series" data-series="NAME"> with one point per (x, y), plus one
// <circle class="marker"> per point.
std::string render_svg(const std::string& title, const std::vector<PlotPanel>& panels);

// Panels for a bench JSON document: a list of `--vs-llamacpp` rows (one cost-curve panel per
// row: dflash, llama.cpp and the physical bound, each forward_ms[K] / forward_ms[1]), or the
// `--draft` object {regimes, cost_model} (cost curve; tok/s and speedup vs block size), or the
// `--concurrency` object {bench: "concurrency", levels, llamacpp?} (aggregate tok/s vs streams,
// end to end and while all decode; speculative / plain, the paired medians).
std::vector<PlotPanel> bench_plot_panels(const nlohmann::json& doc);
// Renders bench_plot_panels(doc) to path; throws dflash::Error when it cannot be written or
// the document has nothing to plot.
void write_bench_plot(const nlohmann::json& doc, const std::string& path);

// bench --json-out / --plot: writes doc as JSON to json_out (when given) and the picture to
// plot, or when plot is empty and json_out is given, beside it (F.json -> F.svg).
void save_bench_outputs(const nlohmann::json& doc, const std::string& json_out, const std::string& plot);
// bench --plot-from F.json --plot F.svg: redraws a saved result.
void replot_bench(const std::string& json_in, const std::string& plot);

}  // namespace dflash::bench
