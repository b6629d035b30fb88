/* Paired statistics against a baseline picked on the page, computed from the build's per-column data
 * (data/pairs/<suite>/<column>.js: values[R][N], totals = S0 @ W.T [R][B], the W columns of the ids
 * some row misses). The same algebra and rounding as leaderboards/pairdata.py, which mirrors
 * statistics.py's paired_tables (the spec): O(R (N + B log B)) per baseline plus the missing-id
 * corrections, so the build never pairs every two rows. Results go to DARE.store.pairs[baseline]. */
"use strict";

(function () {
  /* numpy's default ("linear") quantile of the first k values of an ascending array, with its lerp. */
  function quantile(sorted, k, q) {
    if (k === 0) return NaN;
    var index = (k - 1) * q, below = Math.floor(index), t = index - below;
    var a = sorted[below], b = sorted[Math.min(below + 1, k - 1)], diff = b - a;
    return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
  }

  function logFactorials(top) {
    var table = new Float64Array(top + 1);
    for (var i = 1; i <= top; i++) table[i] = table[i - 1] + Math.log(i);
    return table;
  }

  /* Exact two-sided McNemar p: twice the Binomial(gained + lost, 1/2) tail at min(gained, lost), capped at 1. */
  function mcnemar(gained, lost, logFact) {
    var n = gained + lost, tail = 0;
    for (var k = 0; k <= Math.min(gained, lost); k++) {
      tail += Math.exp(logFact[n] - logFact[k] - logFact[n - k] - n * Math.LN2);
    }
    return Math.min(1, 2 * tail);
  }

  /* numpy's np.round(x, 6): rint (half to even) of x * 1e6; + 0 turns -0 into 0. */
  function round6(x) {
    var y = x * 1e6, r = Math.round(y);
    if (r - y === 0.5 && r % 2 !== 0) r -= 1;
    return r / 1e6 + 0;
  }

  function shown(stats) {
    var out = stats.slice(0, 3).map(round6).concat([Number(stats[3].toPrecision(6)), stats[4]]);
    return out.map(function (v) { return isNaN(v) ? null : v; });
  }

  /* Row id -> unrounded [delta, lo, hi, p, n] of every row sharing an item with the baseline. */
  function columnPairs(data, baseline) {
    var b = data.rows.indexOf(baseline), out = {};
    if (b < 0) return out;
    var n = data.n, values = data.values, mine = values[b], totals = data.totals, B = totals[b].length;
    var weightOf = {};
    data.missing.forEach(function (position, k) { weightOf[position] = data.weights[k]; });
    var baseMissing = [], sharedBase = new Float64Array(B).fill(n);
    mine.forEach(function (v, i) {
      if (v !== null) return;
      baseMissing.push(i);
      for (var j = 0; j < B; j++) sharedBase[j] -= weightOf[i][j];
    });
    var logFact = logFactorials(n), boot = new Float64Array(B);
    data.rows.forEach(function (row, a) {
      if (a === b) return;
      var theirs = values[a], shared = 0, crossA = 0, crossB = 0, both = 0, i, j, w, v;
      var own = Float64Array.from(totals[a]), base = Float64Array.from(totals[b]), weight = Float64Array.from(sharedBase);
      for (i = 0; i < n; i++) {
        if (theirs[i] === null) {  // an id a misses: leave b's value there out, and its weight unless b misses it too
          w = weightOf[i];
          for (j = 0; j < B; j++) weight[j] -= w[j];
          if (mine[i] === null) { for (j = 0; j < B; j++) weight[j] += w[j]; } else if (mine[i] !== 0) {
            for (j = 0, v = mine[i]; j < B; j++) base[j] -= v * w[j];
          }
        } else if (mine[i] !== null) {
          shared += 1; crossA += theirs[i]; crossB += mine[i]; both += theirs[i] * mine[i];
        }
      }
      if (shared === 0) return;
      baseMissing.forEach(function (k) {  // an id b misses: leave a's value there out
        if (!theirs[k]) return;
        for (var j2 = 0, w2 = weightOf[k], v2 = theirs[k]; j2 < B; j2++) own[j2] -= v2 * w2[j2];
      });
      var valid = 0;
      for (j = 0; j < B; j++) boot[j] = weight[j] > 0 ? (own[j] - base[j]) / weight[j] : NaN;
      boot.sort();  // typed arrays sort numerically, NaN last
      while (valid < B && !isNaN(boot[valid])) valid++;
      var p = data.binary[a] && data.binary[b]
        ? mcnemar(Math.round(crossA - both), Math.round(crossB - both), logFact) : NaN;
      out[row] = [(crossA - crossB) / shared, quantile(boot, valid, 0.025), quantile(boot, valid, 0.975), p, shared];
    });
    return out;
  }

  /* {other row: {column id or "_mean": [delta, lo, hi, p or null, n]}}; `columns`: column id -> data.
   * The suite mean needs the pair in every column: mean delta, half-width sqrt(sum of squared
   * per-column half-widths) / number of columns, no p. */
  function forBaseline(columns, baseline) {
    var ids = Object.keys(columns).sort(), perColumn = {}, result = {};
    ids.forEach(function (id) {
      perColumn[id] = columnPairs(columns[id], baseline);
      Object.keys(perColumn[id]).forEach(function (row) {
        (result[row] = result[row] || {})[id] = shown(perColumn[id][row]);
      });
    });
    Object.keys(result).forEach(function (row) {
      var stats = ids.map(function (id) { return perColumn[id][row]; });
      if (stats.some(function (s) { return !s; })) return;
      var delta = 0, squares = 0, n = 0;
      stats.forEach(function (s) { var h = (s[2] - s[1]) / 2; delta += s[0]; squares += h * h; n += s[4]; });
      delta /= ids.length;
      var half = Math.sqrt(squares) / ids.length;
      result[row]._mean = shown([delta, delta - half, delta + half, NaN, n]);
    });
    DARE.store.pairs[baseline] = result;
    return result;
  }

  DARE.pairs = { forBaseline: forBaseline, quantile: quantile, mcnemar: mcnemar, round6: round6 };
})();
