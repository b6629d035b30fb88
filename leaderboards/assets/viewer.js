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

  // Any JSON value as something to read: objects as nested key/value tables, lists of plain values as
  // bullet lists, multi-line strings in <pre> (real line breaks, never a literal "\n").
  function valueNode(v) {
    if (v === null || v === undefined) return el("code", { text: "—" });
    if (Array.isArray(v)) {
      if (v.every(function (x) { return x === null || typeof x !== "object"; })) {
        return v.length ? el("ul", {}, v.map(function (x) { return el("li", {}, [valueNode(x)]); })) : el("code", { text: "[]" });
      }
      return el("ol", {}, v.map(function (x) { return el("li", {}, [valueNode(x)]); }));
    }
    if (typeof v === "object") {
      var keys = Object.keys(v).sort();
      if (!keys.length) return el("code", { text: "{}" });
      return el("table", { class: "nested" }, keys.map(function (k) {
        return el("tr", {}, [el("th", { text: k }), el("td", {}, [valueNode(v[k])])]);
      }));
    }
    if (typeof v === "string" && v.indexOf("\n") >= 0) return el("pre", { text: v });
    return el("code", { text: String(v) });
  }

  function keyValues(title, object) {
    var rows = Object.keys(object || {}).sort().map(function (k) {
      return el("tr", {}, [el("th", { text: k }), el("td", {}, [valueNode(object[k])])]);
    });
    return el("section", { class: "kv" }, [el("h3", { text: title }), el("table", {}, rows.length ? rows : [el("tr", {}, [el("td", { text: "(none)" })])])]);
  }

  var COUNT_KEYS = ["scored", "error", "unscored", "generated", "cached"];

  function countsTable(counts) {
    var benches = Object.keys(counts || {}).sort();
    if (!benches.length) return null;
    var keys = COUNT_KEYS.slice();
    benches.forEach(function (b) { Object.keys(counts[b]).forEach(function (k) { if (keys.indexOf(k) < 0) keys.push(k); }); });
    return el("section", { class: "kv" }, [el("h3", { text: "Counts" }), el("table", { class: "counts" },
      [el("tr", {}, [el("th", { text: "benchmark" })].concat(keys.map(function (k) { return el("th", { text: k }); })))].concat(
        benches.map(function (b) {
          return el("tr", {}, [el("td", { text: b })].concat(keys.map(function (k) {
            return el("td", { text: counts[b][k] === undefined ? "—" : String(counts[b][k]) });
          })));
        })))]);
  }

  function metricsTable(record, files) {
    var head = el("tr", {}, ["benchmark", "metric", "value", "95% CI", "n", "samples"].map(function (t) { return el("th", { text: t }); }));
    var rows = [];
    Object.keys(record.metrics).sort().forEach(function (bench) {
      Object.keys(record.metrics[bench]).sort().forEach(function (metric) {
        var m = record.metrics[bench][metric];
        rows.push(el("tr", {}, [el("td", { text: bench }), el("td", { text: metric }), el("td", { text: DARE.pct(m.value) }),
          el("td", { text: "[" + DARE.pct(m.ci[0]) + ", " + DARE.pct(m.ci[1]) + "]" }), el("td", { text: String(m.n) }),
          el("td", {}, [files[bench] ? el("a", { href: "#", onclick: function (e) { e.preventDefault(); DARE.setState({ bench: bench, vf: "all", vq: "", vp: "0" }); } }, ["view " + files[bench].lines]) : "none"])]));
      });
    });
    return el("table", { class: "metrics" }, [head].concat(rows));
  }

  function benchmarkInfo(info) {
    return el("section", { class: "kv" }, [el("h3", { text: "Benchmark " + info.name }),
      el("table", {}, [["data file", info.data_file], ["data sha256", info.data_sha256],
        ["dataset version", info.dataset_version || "not recorded"], ["config version", info.version],
        ["samples used", info.n_used + " of " + info.n_total], ["verifier", info.verifier + " v" + info.verifier_version],
        ["verifier args", info.verifier_args], ["prompt template hash", info.prompt_template_hash]].map(function (kv) {
        return el("tr", {}, [el("th", { text: kv[0] }), el("td", {}, [valueNode(kv[1])])]);
      })), el("h4", { text: "Prompt template" }), el("pre", { class: "template", text: info.prompt_template })]);
  }

  function sampleCard(s) {
    var verdict = verdictOf(s);
    return el("article", { class: "sample " + verdict, dataset: { verdict: verdict, id: s.id } }, [
      el("header", {}, [el("strong", { text: s.id }), s.index ? " #" + s.index : "",
        el("span", { class: "badge " + verdict, text: verdict }),
        el("span", { class: "meta", text: "score " + s.score + " · " + (s.finish_reason || "") + (s.nfe ? " · NFE " + s.nfe : "") })]),
      answerBlock("answer", s.answer), answerBlock("reference", s.reference),
      el("details", {}, [el("summary", { text: "prompt (" + (s.messages || []).length + " messages)" })].concat((s.messages || []).map(function (m) {
        return el("div", { class: "msg" }, [el("span", { class: "role", text: m.role }), el("pre", { text: m.content })]);
      }))),
      el("div", { class: "label", text: "completion" }), el("pre", { class: "completion", text: s.completion }),
      el("details", {}, [el("summary", { text: "verifier details" }), valueNode(s.details)])]);
  }

  // Short one-line answers sit inline; code, tests and other multi-line text keep their line breaks.
  function answerBlock(label, value) {
    var body;
    if (value !== null && typeof value === "object") body = valueNode(value);  // e.g. tests + entry point
    else {
      var text = value === null || value === undefined ? "—" : String(value);
      body = text.indexOf("\n") >= 0 || text.length > 120 ? el("pre", { text: text }) : el("code", { text: text });
    }
    return el("div", { class: "answer " + label }, [el("span", { class: "label", text: label + " " }), body]);
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
      metricsTable(record, detail.cells), countsTable(record.counts),
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
