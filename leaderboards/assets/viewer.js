/* The run page: everything needed to trust a cell (decoding config, fingerprints, data hash, prompt
 * template, verifier, environment) and a paged per-sample viewer with verdict filters and search.
 * The run's record and each cell's samples are loaded on demand from data/runs and data/samples. */
"use strict";

(function () {
  var el = DARE.el;
  var PAGE = 25;
  var VERDICTS = ["all", "pass", "fail", "error", "unscored"];
  var lastShown = "";

  function verdictOf(s) {
    if (s.status === "error") return "error";
    if (s.status === "unscored") return "unscored";
    return s.passed ? "pass" : "fail";
  }

  function keyValues(title, object) {
    var rows = Object.keys(object || {}).sort().map(function (k) {
      var v = object[k];
      var text = v !== null && typeof v === "object" ? JSON.stringify(v) : String(v);
      return el("tr", {}, [el("th", { text: k }), el("td", {}, [el("code", { text: text })])]);
    });
    return el("section", { class: "kv" }, [el("h3", { text: title }), el("table", {}, rows.length ? rows : [el("tr", {}, [el("td", { text: "(none)" })])])]);
  }

  function metricsTable(record, files) {
    var head = el("tr", {}, ["benchmark", "metric", "value", "95% CI", "n", "counts", "samples"].map(function (t) { return el("th", { text: t }); }));
    var rows = [];
    Object.keys(record.metrics).sort().forEach(function (bench) {
      Object.keys(record.metrics[bench]).sort().forEach(function (metric) {
        var m = record.metrics[bench][metric];
        rows.push(el("tr", {}, [el("td", { text: bench }), el("td", { text: metric }), el("td", { text: DARE.pct(m.value) }),
          el("td", { text: "[" + DARE.pct(m.ci[0]) + ", " + DARE.pct(m.ci[1]) + "]" }), el("td", { text: String(m.n) }),
          el("td", { text: JSON.stringify((record.counts || {})[bench] || {}) }),
          el("td", {}, [files[bench] ? el("a", { href: "#", onclick: function (e) { e.preventDefault(); DARE.setState({ bench: bench, vf: "all", vq: "", vp: "0" }); } }, ["view " + files[bench].lines]) : "none"])]));
      });
    });
    return el("table", { class: "metrics" }, [head].concat(rows));
  }

  function benchmarkInfo(info) {
    return el("section", { class: "kv" }, [el("h3", { text: "Benchmark " + info.name }),
      el("table", {}, [["data file", info.data_file], ["data sha256", info.data_sha256], ["version", info.version],
        ["samples used", info.n_used + " of " + info.n_total], ["verifier", info.verifier + " v" + info.verifier_version],
        ["verifier args", JSON.stringify(info.verifier_args)], ["prompt template hash", info.prompt_template_hash]].map(function (kv) {
        return el("tr", {}, [el("th", { text: kv[0] }), el("td", {}, [el("code", { text: String(kv[1]) })])]);
      })), el("h4", { text: "Prompt template" }), el("pre", { class: "template", text: info.prompt_template })]);
  }

  function sampleCard(s) {
    var verdict = verdictOf(s);
    return el("article", { class: "sample " + verdict, dataset: { verdict: verdict, id: s.id } }, [
      el("header", {}, [el("strong", { text: s.id }), s.index ? " #" + s.index : "",
        el("span", { class: "badge " + verdict, text: verdict }),
        el("span", { class: "meta", text: "score " + s.score + " · answer " + JSON.stringify(s.answer) + " · reference " +
          JSON.stringify(s.reference) + " · " + (s.finish_reason || "") + (s.nfe ? " · NFE " + s.nfe : "") })]),
      el("details", {}, [el("summary", { text: "prompt (" + (s.messages || []).length + " messages)" })].concat((s.messages || []).map(function (m) {
        return el("div", { class: "msg" }, [el("span", { class: "role", text: m.role }), el("pre", { text: m.content })]);
      }))),
      el("div", { class: "label", text: "completion" }), el("pre", { class: "completion", text: s.completion }),
      el("details", {}, [el("summary", { text: "verifier details" }), el("pre", { text: JSON.stringify(s.details, null, 1) })])]);
  }

  function withoutCurve(training) {
    var copy = Object.assign({}, training);
    if (copy.curve) copy.curve = copy.curve.length + " points (plotted above)";
    return copy;
  }

  function haystack(s) {
    if (s._hay === undefined) {
      s._hay = [s.id, s.completion, s.answer, s.reference].concat((s.messages || []).map(function (m) { return m.content; }))
        .join("\n").toLowerCase();
    }
    return s._hay;
  }

  function sampleViewer(samples, state, total) {
    var query = state.vq.toLowerCase();
    var counts = { all: samples.length };
    samples.forEach(function (s) { var v = verdictOf(s); counts[v] = (counts[v] || 0) + 1; });
    var shown = samples.filter(function (s) {
      return (state.vf === "all" || verdictOf(s) === state.vf) && (!query || haystack(s).indexOf(query) >= 0);
    });
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    var page = Math.min(Math.max(0, parseInt(state.vp, 10) || 0), pages - 1);
    var search = el("input", { type: "search", id: "sample-search", placeholder: "search prompt, completion, answer, id", value: state.vq });
    search.addEventListener("change", function () { DARE.setState({ vq: search.value, vp: "0" }); });
    var filters = VERDICTS.map(function (v) {
      return el("button", { type: "button", class: "filter" + (state.vf === v ? " active" : ""), dataset: { verdict: v },
        onclick: function () { DARE.setState({ vf: v, vp: "0" }); } }, [v + " (" + (counts[v] || 0) + ")"]);
    });
    var pager = el("div", { class: "pager" }, [
      el("button", { type: "button", id: "prev-page", disabled: page === 0, onclick: function () { DARE.setState({ vp: String(page - 1) }); } }, ["‹ prev"]),
      el("span", { id: "page-info", text: "page " + (page + 1) + " of " + pages + " · " + shown.length + " of " + total + " samples" }),
      el("button", { type: "button", id: "next-page", disabled: page >= pages - 1, onclick: function () { DARE.setState({ vp: String(page + 1) }); } }, ["next ›"])]);
    return el("section", { class: "samples" }, [el("div", { class: "controls" }, filters.concat([search])), pager,
      el("div", { id: "sample-list" }, shown.slice(page * PAGE, (page + 1) * PAGE).map(sampleCard))]);
  }

  function renderRun(state, detail) {
    var host = document.getElementById("run");
    var record = detail.record;
    var bench = state.bench && record.benchmarks[state.bench] ? state.bench : Object.keys(record.benchmarks).sort()[0];
    var decoding = Object.assign({}, record.decoding);
    var parts = [
      el("a", { href: "#", class: "back", onclick: function (e) { e.preventDefault(); DARE.setState({ run: "", bench: "", vf: "all", vq: "", vp: "0" }); } }, ["← leaderboard"]),
      el("h2", { text: record.model.name + " · " + record.suite + " · " + bench }),
      el("p", { class: "sub", text: "run " + record.run_id + " · " + record.status + " · created " + record.created_at +
        " · decoding " + decoding.config_hash + " · " + detail.directory }),
      el("p", {}, [el("a", { href: "#", class: "jump", onclick: function (e) { e.preventDefault();
        document.getElementById("sample-host").scrollIntoView(); } }, ["↓ samples of " + bench])]),
      metricsTable(record, detail.cells),
      detail.curves ? el("section", { class: "curves" }, [el("h3", { text: "Training curves (" + (record.model.training || {}).algorithm + ")" }), DARE.svg(detail.curves, "curve-holder")]) : null,
      el("div", { class: "grid" }, [keyValues("DecodingConfig", decoding), benchmarkInfo(record.benchmarks[bench]),
        keyValues("Model", Object.assign({}, record.model, { training: record.model.training ? "(see below)" : null })),
        keyValues("Backend", { name: record.backend.name, version: record.backend.version, options: record.backend.options }),
        keyValues("Environment", record.environment), keyValues("Timing", record.timing),
        keyValues("Isolation", record.isolation), keyValues("Run", { flags: record.flags, command: (record.command || []).join(" "),
          samples_path: record.samples_path, finished_at: record.finished_at })]),
      record.model.training ? keyValues("Training run", withoutCurve(record.model.training)) : null,
      el("h3", { text: "Samples of " + bench }),
      el("div", { id: "sample-host", text: detail.cells[bench] ? "loading samples…" : "This run has no samples.jsonl entries for " + bench + "." })];
    host.replaceChildren.apply(host, parts.filter(Boolean));
    if (lastShown !== state.run + "/" + bench) window.scrollTo(0, 0);
    lastShown = state.run + "/" + bench;
    var file = detail.cells[bench];
    if (!file) return;
    var hash = location.hash;
    DARE.load("samples", state.run + "/" + bench, file.shard).then(function (samples) {
      if (location.hash !== hash) return;
      document.getElementById("sample-host").replaceChildren(sampleViewer(samples, state, samples.length));
    }).catch(function (error) {
      document.getElementById("sample-host").textContent = String(error);
    });
  }

  DARE.views.run = function (state) {
    var host = document.getElementById("run");
    host.replaceChildren(el("p", { text: "loading run " + state.run + "…" }));
    DARE.load("run", state.run, "data/runs/" + state.run + ".js")
      .then(function (detail) { renderRun(state, detail); })
      .catch(function (error) { host.replaceChildren(el("p", { class: "error", text: String(error) })); });
  };
})();
