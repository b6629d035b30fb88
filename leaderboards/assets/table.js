/* The leaderboard table: suite tabs, filters, sorting, model grouping, baseline deltas, training curves. */
"use strict";

(function () {
  var $ = function (id) { return document.getElementById(id); };
  var el = DARE.el;
  var FLAG_LABELS = { decoding: "≠ decoding", data: "≠ data", prompt: "≠ prompt", verifier: "≠ verifier",
    batch: "batch", partial: "partial run", failed: "failed run", subset: "subset" };

  function index() { return DARE.store.index.main; }

  function currentSuite(state) {
    var suites = index().suites;
    return suites.filter(function (s) { return s.name === state.suite; })[0] || suites[0];
  }

  function fillSelect(select, values, chosen, label) {
    select.replaceChildren(el("option", { value: "", text: "all " + label }));
    values.forEach(function (v) { select.appendChild(el("option", { value: v, text: v, selected: v === chosen })); });
    select.value = chosen;
  }

  function unique(rows, key) {
    return Array.from(new Set(rows.map(function (r) { return r[key]; }))).sort();
  }

  function matches(row, state) {
    if (state.family && row.family !== state.family) return false;
    if (state.algorithm && row.algorithm !== state.algorithm) return false;
    if (state.backend && row.backend_name !== state.backend) return false;
    if (!state.q) return true;
    var hay = [row.model, row.id, row.algorithm, row.backend, row.decoding, row.decoding_hash,
      row.training_run || "", row.family].join(" ").toLowerCase();
    return state.q.toLowerCase().split(/\s+/).every(function (word) { return hay.indexOf(word) >= 0; });
  }

  function sortValue(row, key) {
    if (key === "mean") return row.mean ? row.mean.value : null;
    if (key === "model" || key === "decoding" || key === "algorithm" || key === "backend") return row[key];
    // "humaneval@v1|pass@2": a pass@k column beside its column's; split at the last "|" (metric names have none)
    var bar = key.lastIndexOf("|"), column = key.slice(0, bar), metric = key.slice(bar + 1);
    if (bar >= 0) return row.cells[column] && row.cells[column].more[metric] ? row.cells[column].more[metric][0] : null;
    return row.cells[key] ? row.cells[key].v : null;
  }

  function ordered(rows, state) {
    var sign = state.dir === "asc" ? 1 : -1;
    var sorted = rows.slice().sort(function (a, b) {
      var x = sortValue(a, state.sort), y = sortValue(b, state.sort);
      if (x === null || x === undefined) return (y === null || y === undefined) ? 0 : 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : x > y ? 1 : 0) * sign;
    });
    if (state.group !== "1") return sorted;
    // Keep each model's decodings together, groups ordered by their best-placed row.
    var groups = {}, order = [];
    sorted.forEach(function (row) {
      if (!groups[row.group]) { groups[row.group] = []; order.push(row.group); }
      groups[row.group].push(row);
    });
    return [].concat.apply([], order.map(function (g) { return groups[g]; }));
  }

  function header(suite, state) {
    var columns = [["", null], ["Model", "model"], ["Algorithm", "algorithm"], ["Backend", "backend"],
      ["Decoding", "decoding"], ["Training", null]];
    // A column is a benchmark on one dataset version: the version sits on a line of its own under the
    // name (release names can be long), so "mbppplus · pass@1" over "v0.2.0".
    suite.columns.forEach(function (c) {
      var version = c.dataset_version === null ? "version unknown" : c.dataset_version;
      columns.push([c.benchmark + " · " + suite.metrics[c.id], c.id, version]);
      (suite.extra[c.id] || []).forEach(function (m) { columns.push([c.benchmark + " · " + m, c.id + "|" + m, version]); });
    });
    columns.push(["Suite mean", "mean"]);
    // Not sortable: an AUP is scored within its frontier group (its reference run and best accuracy),
    // so two groups' AUPs do not compare.
    if (hasSpeed(suite)) columns.push(["TPF · AUP", null, null, SPEED_TITLE]);
    var tr = el("tr", {}, columns.map(function (col) {
      if (!col[1]) return el("th", { text: col[0], title: col[3] || null, class: col[3] ? "speed" : null });
      var active = state.sort === col[1];
      var arrow = active ? (state.dir === "asc" ? " ▲" : " ▼") : "";
      return el("th", { class: "sortable" + (active ? " sorted" : ""), dataset: { sort: col[1] },
        "aria-sort": active ? (state.dir === "asc" ? "ascending" : "descending") : "none",
        onclick: function () {
          DARE.setState({ sort: col[1], dir: active && state.dir === "desc" ? "asc" : "desc" });
        } }, [el("button", { type: "button", class: "sort" }, [col[0] + arrow]),
        col[2] ? el("div", { class: "dataset-version", text: col[2], title: "dataset version" }) : null]);
    }));
    return tr;
  }

  var SPEED_TITLE = "Rows whose runs are points of an accuracy-speed frontier (runs sharing everything but the " +
    "decoding strategy). TPF: canvas tokens per forward pass (DARE's NFE). AUP: d3LLM's accuracy under parallelism " +
    "(TPF × percentage points) within that frontier group only: the curve from the group's reference run to this " +
    "run, weighted by the group's best accuracy. Compare AUPs within one group; the link opens it.";

  function hasSpeed(suite) {
    return suite.rows.some(function (r) { return r.speed; });
  }

  function fixed(value, digits) {
    return value === null || value === undefined ? "–" : value.toFixed(digits);
  }

  function speedCell(row) {
    var speed = row.speed;
    if (!speed) return el("td", { class: "speed missing", text: "—", title: "not a point of a frontier group" });
    var each = Object.keys(speed.benchmarks).map(function (b) {
      var s = speed.benchmarks[b];
      return b + ": TPF " + fixed(s.tpf, 2) + ", AUP " + (s.aup === null ? "undefined (" + s.note + ")" : fixed(s.aup, 2));
    });
    return el("td", { class: "speed", title: each.join("\n") + (speed.reference ? "\nthe group's reference run" : "") }, [
      el("span", { class: "v", text: "TPF " + fixed(speed.tpf, 2) }),
      speed.aup === null
        ? el("span", { class: "aup undefined", text: "AUP undefined", title: speed.note })
        : el("span", { class: "aup", text: "AUP " + fixed(speed.aup, 1) }),
      el("a", { class: "n", href: speed.page, text: "frontier" + (speed.reference ? " (reference)" : "") })]);
  }

  function flagBadges(flags) {
    return flags.map(function (f) {
      return el("span", { class: "flag " + f.severity, title: f.text, text: FLAG_LABELS[f.kind] || f.kind });
    });
  }

  function valueCell(value, lo, hi, n) {
    return [el("span", { class: "v", text: DARE.pct(value) }),
      el("span", { class: "ci", text: lo === null || lo === undefined ? "" : "[" + DARE.pct(lo) + ", " + DARE.pct(hi) + "]" }),
      el("span", { class: "n", text: "n=" + n })];
  }

  function deltaCell(stats, row, base, key) {
    if (stats) {
      // Pass/fail verdicts: the exact McNemar test decides; other scores: the bootstrap interval excludes 0.
      var significant = stats[3] !== null ? stats[3] < 0.05 : (stats[1] > 0 || stats[2] < 0);
      var p = stats[3] === null ? "" : "; McNemar p=" + (stats[3] < 1e-4 ? "<1e-4" : stats[3].toPrecision(2));
      return { cls: "delta " + (significant ? (stats[0] > 0 ? "up sig" : "down sig") : "ns"),
        title: "paired on " + stats[4] + " shared samples: Δ " + DARE.signed(stats[0]) + " points, bootstrap 95% CI [" +
          DARE.signed(stats[1]) + ", " + DARE.signed(stats[2]) + "]" + p,
        parts: [el("span", { class: "v", text: "Δ " + DARE.signed(stats[0]) + (significant ? " *" : "") }),
          el("span", { class: "ci", text: "[" + DARE.signed(stats[1]) + ", " + DARE.signed(stats[2]) + "]" }),
          el("span", { class: "n", text: stats[3] === null ? "paired n=" + stats[4] : "p=" + (stats[3] < 1e-4 ? "<1e-4" : stats[3].toPrecision(2)) })] };
    }
    var mine = key === "mean" ? (row.mean || {}).value : (row.cells[key] || {}).v;
    var theirs = key === "mean" ? (base.mean || {}).value : (base.cells[key] || {}).v;
    if (mine === null || mine === undefined || theirs === null || theirs === undefined) return null;
    return { cls: "delta unpaired", title: "no shared samples with the baseline: unpaired difference, no test",
      parts: [el("span", { class: "v", text: "Δ " + DARE.signed(mine - theirs) }), el("span", { class: "n", text: "unpaired" })] };
  }

  // The build flags each cell against its column's reference (the --baseline row, else a stated rule).
  // A baseline picked on the page becomes the reference instead: identity flags are recomputed against
  // its cell; status flags (partial, failed, subset) stay as built.
  var IDENTITY = [["decoding", "dh", "decoding"], ["data", "data", "data sha256"], ["prompt", "prompt", "prompt template hash"],
    ["verifier", "verifier", "verifier"]];

  function cellFlags(row, bench, ctx) {
    var cell = row.cells[bench];
    var ref = ctx.base && ctx.base.id !== ctx.reference ? ctx.base.cells[bench] : null;
    if (!ref) return cell.flags;
    var kinds = IDENTITY.map(function (g) { return g[0]; }).concat(["batch"]);
    var flags = cell.flags.filter(function (f) { return kinds.indexOf(f.kind) < 0; });
    IDENTITY.forEach(function (g) {
      if (cell[g[1]] === ref[g[1]]) return;
      var text = g[0] === "decoding"
        ? "decoding " + cell.dh.slice(0, 12) + " differs from the baseline's " + ref.dh.slice(0, 12) + ": " + row.decoding +
          " (baseline: " + ctx.base.decoding + ")"
        : g[2] + " " + cell[g[1]] + " differs from the baseline's " + ref[g[1]];
      flags.push({ kind: g[0], severity: "major", text: text });
    });
    if (cell.bs !== ref.bs) {
      flags.push({ kind: "batch", severity: "minor", text: "batch_size " + cell.bs + " (baseline: " + ref.bs + "); execution only, not part of the config hash" });
    }
    return flags;
  }

  function versionText(cell) {
    if (cell.ver === null || cell.ver === undefined) return "dataset version unknown (not recorded)";
    return "dataset " + cell.ver + (cell.ver_inferred ? " (not recorded by this run: inferred from the data sha256)" : "");
  }

  function benchCell(row, column, ctx) {
    var bench = column.id, cell = row.cells[bench];
    var where = { bench: column.benchmark, column: column.id };
    if (!cell) return el("td", { class: "missing", text: "—", title: "no run of this row covers " + column.label, dataset: where });
    var flags = cellFlags(row, bench, ctx);
    var content = valueCell(cell.v, cell.lo, cell.hi, cell.n), cls = "cell", title = "";
    if (ctx.base && ctx.base.id !== row.id) {
      var d = deltaCell(((ctx.pairs || {})[row.id] || {})[bench], row, ctx.base, bench);
      if (d) { content = d.parts; cls += " " + d.cls; title = d.title + "\n"; }
    }
    var major = flags.some(function (f) { return f.severity === "major"; });
    title += DARE.pct(cell.v) + " [" + DARE.pct(cell.lo) + ", " + DARE.pct(cell.hi) + "] (bootstrap 95% CI) n=" + cell.n +
      "\nrun " + cell.run + " (" + cell.status + ", " + cell.created + "), commit " + cell.commit +
      "\ndecoding " + cell.dh + ", data " + cell.data + ", verifier " + cell.verifier + "\n" + versionText(cell) +
      flags.map(function (f) { return "\n⚠ " + f.text; }).join("");
    return el("td", { class: cls + (major ? " noncomparable" : ""), title: title, dataset: where }, [
      el("button", { class: "open", type: "button", onclick: function () { DARE.setState({ run: cell.run, bench: cell.b, vf: "all", vq: "", vp: "0" }); } },
        content.concat(flagBadges(flags)))]);
  }

  function extraCell(row, column, metric) {
    var values = row.cells[column.id] && row.cells[column.id].more[metric];
    if (!values) return el("td", { class: "missing", text: "—", title: "no " + metric + " for " + column.label + " in this row (k too small)" });
    return el("td", { class: "cell more", dataset: { bench: column.benchmark, column: column.id, metric: metric },
      title: metric + " (unbiased estimator) " + DARE.pct(values[0]) + " [" + DARE.pct(values[1]) + ", " + DARE.pct(values[2]) + "] n=" + values[3] },
      valueCell(values[0], values[1], values[2], values[3]));
  }

  function meanCell(row, ctx) {
    var mean = row.mean || {};
    if (mean.value === null || mean.value === undefined) {
      return el("td", { class: "missing partial", title: "missing " + (mean.missing || []).join(", ") + ": not averaged" },
        [el("span", { class: "flag major", text: "partial" })]);
    }
    var content = valueCell(mean.value, mean.ci[0], mean.ci[1], mean.n), cls = "mean";
    var title = "macro mean over the suite's benchmarks; CI from the per-benchmark intervals (normal approximation)";
    if (ctx.base && ctx.base.id !== row.id) {
      var d = deltaCell(((ctx.pairs || {})[row.id] || {})._mean, row, ctx.base, "mean");
      if (d) { content = d.parts; cls += " " + d.cls; title = d.title; }
    }
    return el("td", { class: cls, title: title }, content);
  }

  function trainingCell(row, rowsById) {
    if (row.algorithm === "base") return el("td", { class: "training" });
    var base = rowsById[row.base_row];
    return el("td", { class: "training" }, [
      row.spark ? DARE.svg(row.spark, "spark-holder") : null,
      el("div", { class: "small", text: row.algorithm + (row.training_step !== null ? " @ step " + row.training_step : "") }),
      // The link and the button each get a line of their own (block boxes): side by side they overlapped.
      base ? el("div", { class: "base-line" }, [el("a", { href: "#", class: "base-link", title: "show the base model's row", onclick: function (e) {
        e.preventDefault(); highlight(base.id); } }, ["base: " + base.model])]) : el("div", { class: "small", text: "base: " + (row.base_model || "?") }),
      base ? el("button", { type: "button", class: "vs-base", onclick: function () { DARE.setState({ baseline: base.id }); } }, ["Δ vs base"]) : null]);
  }

  function highlight(rowId) {
    var tr = document.querySelector('tr[data-row="' + rowId + '"]');
    if (!tr) { DARE.setState({ q: "", family: "", algorithm: "", backend: "" }); return; }
    tr.scrollIntoView({ block: "center" });
    tr.classList.add("flash");
    setTimeout(function () { tr.classList.remove("flash"); }, 1500);
  }

  function referenceText(suite) {
    var rows = suite.rows.filter(function (r) { return r.id === suite.reference; });
    return rows.length ? "the build's baseline “" + rows[0].model + "”" : suite.reference;
  }

  function render(state, suite, pairs) {
    var rowsById = {};
    suite.rows.forEach(function (r) { rowsById[r.id] = r; });
    var base = rowsById[state.baseline] || null;
    var ctx = { base: base, pairs: pairs, reference: suite.reference };
    var rows = ordered(suite.rows.filter(function (r) { return matches(r, state); }), state);
    var table = $("table");
    table.tHead.replaceChildren(header(suite, state));
    var seen = {}, groupSize = {}, speedShown = hasSpeed(suite);
    suite.rows.forEach(function (r) { groupSize[r.group] = (groupSize[r.group] || 0) + 1; });
    table.tBodies[0].replaceChildren.apply(table.tBodies[0], rows.map(function (row) {
      var sizes = groupSize[row.group];
      var continued = state.group === "1" && seen[row.group];
      seen[row.group] = true;
      var cls = (base && base.id === row.id ? "baseline " : "") + (continued ? "group-cont" : "");
      var cells = [
        el("td", {}, [el("input", { type: "radio", name: "baseline-pick", title: "use as baseline", checked: base && base.id === row.id,
          onchange: function () { DARE.setState({ baseline: row.id }); } })]),
        el("td", { class: "model", title: row.id + "\nfingerprint " + row.fingerprint }, [
          el("span", { class: "name", text: (continued ? "↳ " : "") + row.model }),
          sizes > 1 && !continued && state.group === "1" ? el("span", { class: "tag", text: sizes + " decodings" }) : null,
          base && base.id === row.id ? el("span", { class: "tag base", text: "baseline" }) : null,
          row.git_dirty ? el("span", { class: "tag dirty", text: "dirty", title: "built from a git tree with uncommitted changes" }) : null]),
        el("td", { text: row.algorithm }),
        el("td", { text: row.backend }),
        el("td", { class: "decoding", title: "DecodingConfig hash " + row.decoding_hash }, [row.decoding,
          el("div", { class: "hash", text: row.decoding_hash })]),
        trainingCell(row, rowsById)];
      suite.columns.forEach(function (c) {
        cells.push(benchCell(row, c, ctx));
        (suite.extra[c.id] || []).forEach(function (m) { cells.push(extraCell(row, c, m)); });
      });
      cells.push(meanCell(row, ctx));
      if (speedShown) cells.push(speedCell(row));
      return el("tr", { class: cls, dataset: { row: row.id, group: row.group } }, cells);
    }));
    $("empty").hidden = rows.length > 0;
    $("legend").textContent = base
      ? "Δ = row minus baseline “" + base.model + "” in points, paired on shared samples, [bootstrap 95% CI]; * = significant at 5% (exact McNemar test for pass/fail verdicts, else the CI excludes 0). Hatched cells are not comparable with the baseline's."
      : "Cells: value in %, [bootstrap 95% CI], n. Hatched cells are not comparable with their column's reference, " + referenceText(suite) +
        " (hover for the difference). Click a cell for its run and samples.";
  }

  DARE.views.board = function (state) {
    var data = index(), suite = currentSuite(state);
    document.title = data.title;
    $("suites").replaceChildren.apply($("suites"), data.suites.map(function (s) {
      return el("button", { type: "button", class: s.name === suite.name ? "active" : "", dataset: { suite: s.name },
        onclick: function () { DARE.setState({ suite: s.name, sort: "mean", baseline: "" }); } }, [s.name + " (" + s.rows.length + ")"]);
    }));
    fillSelect($("f-family"), unique(suite.rows, "family"), state.family, "families");
    fillSelect($("f-algorithm"), unique(suite.rows, "algorithm"), state.algorithm, "algorithms");
    fillSelect($("f-backend"), unique(suite.rows, "backend_name"), state.backend, "backends");
    // "" = the build's --baseline default for this suite; "none" = explicitly no baseline.
    if (!state.baseline) state.baseline = data.baseline[suite.name] || "none";
    $("baseline").replaceChildren(el("option", { value: "none", text: "none" }));
    suite.rows.forEach(function (r) {
      $("baseline").appendChild(el("option", { value: r.id, text: r.model + " · " + r.decoding_hash.slice(0, 8) + (r.algorithm !== "base" ? " · " + r.algorithm : "") }));
    });
    $("baseline").value = state.baseline;
    if ($("q").value !== state.q) $("q").value = state.q;
    $("group").checked = state.group === "1";
    $("exports").replaceChildren(el("a", { href: data.exports.csv, download: "" }, ["CSV"]), " ",
      el("a", { href: data.exports.json, download: "" }, ["JSON"]));
    $("footer").textContent = "Built " + data.generated_at + " by dare-leaderboard. Offline: no request leaves this page.";
    renderSkipped(data.skipped);
    render(state, suite, null);
    var base = suite.rows.filter(function (r) { return r.id === state.baseline; })[0];
    if (!base || !base.pairs) return;
    var hash = location.hash;
    pairsAgainst(suite, base.id).then(function (pairs) {
      if (location.hash === hash) render(state, suite, pairs);  // a newer view may have replaced this one
    });
  };

  /* The build precomputes its own baseline's pairs; any other baseline's are computed here from the
   * suite's per-column data (every column: the suite mean needs them all). */
  function pairsAgainst(suite, baseline) {
    if (suite.pairs.precomputed.indexOf(baseline) >= 0) {
      return DARE.load("pairs", baseline, "data/pairs/" + baseline + ".js");
    }
    if (DARE.store.pairs[baseline]) return Promise.resolve(DARE.store.pairs[baseline]);
    var ids = Object.keys(suite.pairs.columns);
    return Promise.all(ids.map(function (id) {
      return DARE.load("columns", suite.pairs.columns[id], suite.pairs.columns[id]);
    })).then(function (loaded) {
      var columns = {};
      ids.forEach(function (id, i) { columns[id] = loaded[i]; });
      return DARE.pairs.forBaseline(columns, baseline);
    });
  }

  function renderSkipped(skipped) {
    var box = $("skipped");
    box.hidden = !skipped.length;
    box.replaceChildren(el("details", {}, [el("summary", { text: skipped.length + " run record(s) skipped" })].concat(
      skipped.map(function (s) { return el("div", { class: "skip", text: s.path + ": " + s.reason }); }))));
  }

  function bindControls() {
    var typing = null;  // re-render once typing pauses, not on every key (500 rows take a moment)
    $("q").addEventListener("input", function (e) {
      clearTimeout(typing);
      typing = setTimeout(function () { DARE.setState({ q: e.target.value }); }, 150);
    });
    [["f-family", "family"], ["f-algorithm", "algorithm"], ["f-backend", "backend"], ["baseline", "baseline"]].forEach(function (pair) {
      $(pair[0]).addEventListener("change", function (e) { var c = {}; c[pair[1]] = e.target.value; DARE.setState(c); });
    });
    $("group").addEventListener("change", function (e) { DARE.setState({ group: e.target.checked ? "1" : "0" }); });
  }
  document.addEventListener("DOMContentLoaded", bindControls);
})();
