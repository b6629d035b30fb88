/* DARE leaderboard core: the data store, on-demand script loading, DOM helpers and URL-hash state.
 * Data files call DARE.register(kind, key, payload); they are loaded with <script src> (never fetch),
 * so the site works from file:// as well as from any static host, and nothing leaves the page. */
"use strict";

var DARE = (function () {
  var store = { index: {}, run: {}, samples: {}, pairs: {}, columns: {} };
  var pending = {};

  function register(kind, key, payload) {
    if (!store[kind]) store[kind] = {};
    store[kind][key] = payload;
    var id = kind + "/" + key;
    (pending[id] || []).forEach(function (callbacks) { callbacks.resolve(payload); });
    delete pending[id];
  }

  /* Resolve with store[kind][key], injecting the <script> that registers it if needed. */
  function load(kind, key, src) {
    if (store[kind] && Object.prototype.hasOwnProperty.call(store[kind], key)) {
      return Promise.resolve(store[kind][key]);
    }
    var id = kind + "/" + key;
    return new Promise(function (resolve, reject) {
      var first = !pending[id];
      (pending[id] = pending[id] || []).push({ resolve: resolve, reject: reject });
      if (!first) return;
      var script = document.createElement("script");
      script.src = src;
      script.onerror = function () {
        (pending[id] || []).forEach(function (c) { c.reject(new Error("could not load " + src)); });
        delete pending[id];
      };
      script.onload = function () {
        if (pending[id]) {
          pending[id].forEach(function (c) { c.reject(new Error(src + " did not register " + id)); });
          delete pending[id];
        }
      };
      document.head.appendChild(script);
    });
  }

  /* el("td", {class: "x", title: "...", onclick: fn, dataset: {k: v}}, [children or strings]) */
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      var value = attrs[name];
      if (value === null || value === undefined || value === false) return;
      if (name === "text") node.textContent = value;
      else if (name === "dataset") Object.keys(value).forEach(function (k) { node.dataset[k] = value[k]; });
      else if (name.indexOf("on") === 0) node.addEventListener(name.slice(2), value);
      else if (name === "class") node.className = value;
      else node.setAttribute(name, value === true ? "" : value);
    });
    (children || []).forEach(function (child) {
      if (child === null || child === undefined || child === false) return;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  /* SVG built by the Python side at build time from numbers and escaped labels only. */
  function svg(markup, className) {
    var holder = el("span", { class: className || "svg" });
    holder.innerHTML = markup;
    return holder;
  }

  function pct(value, digits) {
    if (value === null || value === undefined || isNaN(value)) return "–";
    return (100 * value).toFixed(digits === undefined ? 1 : digits);
  }

  function signed(value) {
    if (value === null || value === undefined) return "–";
    var text = pct(value);
    return value > 0 ? "+" + text : text.replace("-", "−");
  }

  var defaults = { suite: "", sort: "mean", dir: "desc", q: "", family: "", algorithm: "", backend: "",
    baseline: "", group: "1", run: "", bench: "", vf: "all", vq: "", vp: "0" };

  function readState() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    var state = {};
    Object.keys(defaults).forEach(function (k) { state[k] = params.has(k) ? params.get(k) : defaults[k]; });
    return state;
  }

  /* Merge `changes` into the state kept in the URL hash (so views can be shared as links). */
  function setState(changes) {
    var state = Object.assign(readState(), changes);
    var params = new URLSearchParams();
    Object.keys(state).forEach(function (k) { if (state[k] !== defaults[k]) params.set(k, state[k]); });
    var hash = params.toString();
    if (("#" + hash) === location.hash || (hash === "" && location.hash === "")) route();
    else location.hash = hash;
  }

  var views = {};
  function route() {
    var state = readState();
    var showRun = Boolean(state.run);
    document.getElementById("board").hidden = showRun;
    document.getElementById("run").hidden = !showRun;
    (showRun ? views.run : views.board)(state);
  }

  function start() {
    window.addEventListener("hashchange", route);
    route();
  }
  document.addEventListener("DOMContentLoaded", start);

  return { register: register, load: load, el: el, svg: svg, pct: pct, signed: signed, store: store,
    readState: readState, setState: setState, views: views };
})();
