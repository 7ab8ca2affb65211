/* medibench report: sortable, filterable tables and the sample browser.
   Hand-written, no dependencies; works from file:// (the data is embedded in the page, and
   the sample browser's pages are scripts beside it). */
(function () {
  "use strict";

  // ---- tables: click a header to sort, filters hide rows ------------------------------------
  function cellKey(td, type) {
    var v = td.getAttribute("data-v");
    if (type === "num") {
      if (v === null || v === "") return null;
      var x = parseFloat(v);
      return isNaN(x) ? null : x;
    }
    return (v !== null && v !== "" ? v : td.textContent).toLowerCase();
  }

  function sortTable(table, col, dir) {
    var tbody = table.tBodies[0];
    var type = table.tHead.rows[0].cells[col].getAttribute("data-type") || "text";
    var items = Array.prototype.map.call(tbody.rows, function (tr, i) {
      return { tr: tr, i: i, v: cellKey(tr.cells[col], type) };
    });
    items.sort(function (a, b) {
      if (a.v === null || b.v === null) {  // missing values last, whatever the direction
        return a.v === b.v ? a.i - b.i : (a.v === null ? 1 : -1);
      }
      var c = a.v < b.v ? -1 : (a.v > b.v ? 1 : 0);
      return c !== 0 ? c * dir : a.i - b.i;
    });
    var frag = document.createDocumentFragment();
    items.forEach(function (it) { frag.appendChild(it.tr); });
    tbody.appendChild(frag);
  }

  function initSortable(table) {
    var ths = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(ths, function (th, col) {
      th.tabIndex = 0;
      th.title = "sort";
      var go = function () {
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        Array.prototype.forEach.call(ths, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        sortTable(table, col, dir);
      };
      th.addEventListener("click", go);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") go(); });
    });
  }

  function initTableFilters(box) {
    var table = document.getElementById(box.getAttribute("data-for"));
    if (!table) return;
    var controls = box.querySelectorAll("[data-filter]");
    var count = box.querySelector(".shown-count");
    function apply() {
      var want = {};
      Array.prototype.forEach.call(controls, function (c) {
        want[c.getAttribute("data-filter")] = c.value.trim().toLowerCase();
      });
      var shown = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (tr) {
        var ok = (!want.by || tr.getAttribute("data-by").toLowerCase() === want.by) &&
          (!want.k || tr.getAttribute("data-k").toLowerCase() === want.k) &&
          (!want.text || tr.textContent.toLowerCase().indexOf(want.text) >= 0);
        tr.hidden = !ok;
        if (ok) shown += 1;
      });
      if (count) count.textContent = shown + " of " + table.tBodies[0].rows.length + " rows";
    }
    Array.prototype.forEach.call(controls, function (c) {
      c.addEventListener("input", apply);
      c.addEventListener("change", apply);
    });
    apply();
  }

  // ---- column chooser: hide a leaderboard column everywhere in its table ---------------------
  function initColumnChooser(box) {
    var table = document.getElementById(box.parentNode.getAttribute("data-for"));
    if (!table) return;
    Array.prototype.forEach.call(box.querySelectorAll("[data-col-toggle]"), function (cb) {
      cb.addEventListener("change", function () {
        var col = parseInt(cb.getAttribute("data-col-toggle"), 10);
        Array.prototype.forEach.call(table.rows, function (tr) {
          if (tr.cells[col]) tr.cells[col].classList.toggle("col-hidden", !cb.checked);
        });
      });
    });
  }

  // ---- sample browser ----------------------------------------------------------------------
  // index.html holds a compact index of every sample (what the filters and orders need) and the
  // first page; the other pages' details are scripts samples/page-NNNN.js, added when shown
  // (file:// pages cannot fetch), each setting window.medibenchPages[N].
  var dataEl = document.getElementById("report-data");
  var data = dataEl ? JSON.parse(dataEl.textContent) : { models: [], metrics: [] };
  var models = data.models, metrics = data.metrics;
  var judges = data.judges || {}, answers = {};
  var PAGE = data.page_size || 48;
  var loaded = window.medibenchPages = window.medibenchPages || {};
  if (data.first) loaded[1] = data.first;
  if (loaded[1]) absorb(loaded[1]);
  var samples = indexEntries(data.index);
  var state = { task: "", region: "", modality: "", model: "", status: "", sort: "id",
                text: "", page: 0 };
  var current = [];

  function $(id) { return document.getElementById(id); }
  // One entry per sample, in the run's order: id, task, region, modality, and per model whether
  // it failed and its values (runs[i].failed, runs[i].v), its page and place on that page.
  function indexEntries(ix) {
    if (!ix) return [];
    var where = [];
    ix.order.forEach(function (i, n) { where[i] = n; });
    return ix.ids.map(function (id, i) {
      var code = function (n, vocab) { var c = ix.codes[i][n]; return c === null ? null : ix[vocab][c]; };
      return {
        id: id, i: i, page: Math.floor(where[i] / PAGE) + 1, at: where[i] % PAGE,
        task: code(0, "tasks"), region: code(1, "regions"), modality: code(2, "modalities"),
        runs: ix.values[i].map(function (v, m) { return { failed: ix.failed[i].indexOf(m) >= 0, v: v }; })
      };
    });
  }
  var byId = null;
  function entryById(id) {
    if (byId === null) {
      byId = {};
      samples.forEach(function (x) { byId[x.id] = x; });
    }
    return byId[id];
  }
  // A sample's details (instruction, pictures, outputs, ...) once its page is loaded.
  function detailOf(entry) {
    var page = loaded[entry.page];
    return page ? page.samples[entry.at] : null;
  }
  var pending = {};
  // Load the pages numbered in `pages` (those not loaded yet), then call done().
  function loadPages(pages, done) {
    var need = pages.filter(function (p, n) { return !loaded[p] && pages.indexOf(p) === n; });
    var left = need.length;
    if (!left) { done(); return; }
    need.forEach(function (p) {
      var finish = function () { left -= 1; if (left === 0) done(); };
      if (pending[p]) { pending[p].push(finish); return; }
      pending[p] = [finish];
      var name = "samples/page-" + ("000" + p).slice(-4) + ".js";
      var tag = el("script", { src: name });
      tag.onload = function () {
        var waiting = pending[p];
        delete pending[p];
        if (!loaded[p]) { pageError(name, "it holds no page " + p); return; }
        absorb(loaded[p]);
        waiting.forEach(function (f) { f(); });
      };
      tag.onerror = function () { delete pending[p]; pageError(name, "it could not be read"); };
      document.head.appendChild(tag);
    });
  }
  function absorb(page) {  // the judges' answers a page's outputs link to
    Object.keys(page.answers || {}).forEach(function (k) { answers[k] = page.answers[k]; });
  }
  function pageError(name, why) {
    var box = $("sample-count");
    box.textContent = "The sample data " + name + " beside this page is missing or damaged (" + why +
      "): build the report again.";
    box.classList.add("bad");
  }
  function allPages() {
    var out = [];
    for (var p = 1; p <= (data.pages || 0); p += 1) out.push(p);
    return out;
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function num(v) { return v === "inf" ? Infinity : (v === "-inf" ? -Infinity : v); }
  function fmt(v) {
    v = num(v);
    if (v === null || v === undefined) return "-";
    if (!isFinite(v)) return v > 0 ? "inf" : "-inf";
    return Math.abs(v) < 10 ? v.toFixed(3) : v.toFixed(2);
  }
  function shownModels() {
    return state.model === "" ? models.map(function (_, i) { return i; })
                              : [models.indexOf(state.model)];
  }
  function failed(s) {
    return shownModels().some(function (i) { return s.runs[i] && s.runs[i].failed; });
  }
  // Sort key of "worst first": the worst value over the shown models (higher is worse for
  // lower-is-better metrics); samples without the metric, then failures, last.
  function worstKey(s, mi) {
    var lower = metrics[mi][2], key = null, anyFailed = false;
    shownModels().forEach(function (i) {
      var r = s.runs[i];
      if (!r) return;
      if (r.failed) anyFailed = true;
      var v = num(r.v[mi]);
      if (v === null || v === undefined) return;
      var k = lower ? -v : v;
      if (key === null || k < key) key = k;
    });
    return anyFailed ? null : key;
  }

  function fillSelect(id, values, labels) {
    var sel = $(id);
    values.forEach(function (v, i) { sel.appendChild(el("option", { value: v }, labels ? labels[i] : v)); });
  }
  function distinct(field) {
    var seen = {};
    samples.forEach(function (s) { if (s[field]) seen[s[field]] = true; });
    return Object.keys(seen).sort();
  }

  function filtered() {
    var text = state.text.toLowerCase();
    var out = samples.filter(function (s) {
      return (!state.task || s.task === state.task) && (!state.region || s.region === state.region) &&
        (!state.modality || s.modality === state.modality) &&
        (state.status !== "failed" || failed(s)) && (state.status !== "scored" || !failed(s)) &&
        (!text || s.id.toLowerCase().indexOf(text) >= 0 || ((detailOf(s) || {}).instruction || "").toLowerCase().indexOf(text) >= 0);
    });
    var mi = state.sort !== "id" ? parseInt(state.sort.slice(1), 10) : -1;
    out = out.map(function (s, i) {
      return { s: s, i: i, f: failed(s) ? 1 : 0, k: mi >= 0 ? worstKey(s, mi) : 0 };
    });
    // Scored samples first; failures (kept behind the status filter) after them.
    out.sort(function (a, b) {
      if (a.f !== b.f) return a.f - b.f;
      if (a.k === null || b.k === null) return a.k === b.k ? a.i - b.i : (a.k === null ? 1 : -1);
      return a.k < b.k ? -1 : (a.k > b.k ? 1 : a.i - b.i);
    });
    return out.map(function (x) { return x.s; });
  }

  function picture(p, caption, lazy, absent, short) {
    var fig = el("figure", { "class": "pic" });
    if (!p) {
      fig.appendChild(el("div", { "class": "absent" }, absent || "none"));
    } else if (p.missing) {
      fig.classList.add("is-missing");
      // One short line (error class and first clause); the whole text on hover and in the
      // sample's detail view.
      fig.appendChild(el("div", { "class": "missing", title: p.missing }, short || "no output"));
    } else {
      var a = el("a", { href: p.full || p.thumb, target: "_blank" });
      a.appendChild(el("img", { src: p.thumb, alt: caption, loading: lazy ? "lazy" : "eager" }));
      fig.appendChild(a);
    }
    fig.appendChild(el("figcaption", null, caption));
    return fig;
  }

  function card(s) {
    var c = el("article", { "class": "card", "data-id": s.id, tabindex: "0" });
    var head = el("header");
    head.appendChild(el("strong", null, s.id));
    [s.perspective, s.task, s.region, s.modality].forEach(function (t) {
      if (t) head.appendChild(el("span", { "class": "tag" }, t));
    });
    if (failed(s)) head.appendChild(el("span", { "class": "tag bad" }, "failed"));
    c.appendChild(head);
    c.appendChild(el("p", { "class": "instr" }, s.instruction));
    var row = el("div", { "class": "pics" });
    row.appendChild(picture(s.pics.input, "input", true));
    shownModels().forEach(function (i) {
      var r = s.runs[i];
      var cap = models[i];
      if (state.sort !== "id") cap += " " + fmt(r.v[parseInt(state.sort.slice(1), 10)]);
      if (r.text && !r.output) {
        var t = el("div", { "class": "answer-thumb", title: r.text }, r.text.slice(0, 160));
        var fig = el("figure", { "class": "pic" });
        fig.appendChild(t);
        fig.appendChild(el("figcaption", null, cap));
        row.appendChild(fig);
      } else {
        row.appendChild(picture(r.output, cap, true, null, r.error_short));
      }
    });
    c.appendChild(row);
    var open = function () { openDetail(s.id); };
    c.addEventListener("click", open);
    c.addEventListener("keydown", function (e) { if (e.key === "Enter") open(); });
    return c;
  }

  var drawn = 0;
  function render() {
    var ticket = drawn += 1;
    if (state.text && allPages().some(function (p) { return !loaded[p]; })) {
      // Searching the instructions needs every page's details.
      $("sample-count").textContent = "loading every sample to search their instructions\u2026";
      loadPages(allPages(), function () { if (ticket === drawn) render(); });
      return;
    }
    current = filtered();
    var pages = Math.max(1, Math.ceil(current.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    var shown = current.slice(state.page * PAGE, (state.page + 1) * PAGE);
    var list = $("sample-list");
    list.setAttribute("aria-busy", "true");
    $("sample-count").textContent = current.length + " of " + samples.length + " samples";
    $("page-info").textContent = "page " + (state.page + 1) + " of " + pages;
    $("page-prev").disabled = state.page === 0;
    $("page-next").disabled = state.page >= pages - 1;
    loadPages(shown.map(function (s) { return s.page; }), function () {
      if (ticket !== drawn) return;  // the filters changed meanwhile
      list.textContent = "";
      var frag = document.createDocumentFragment();
      shown.forEach(function (s) { frag.appendChild(card(detailOf(s))); });
      list.appendChild(frag);
      list.setAttribute("data-page", String(state.page + 1));
      list.removeAttribute("aria-busy");
    });
  }

  // Show a sample's detail once its page and those of its in-context demonstrations are loaded.
  function openDetail(id) {
    var entry = entryById(id);
    if (!entry) return;
    loadPages([entry.page], function () {
      var s = detailOf(entry), pages = [];
      shownModels().forEach(function (i) {
        (s.runs[i].demos || []).forEach(function (d) {
          var e = entryById(d);
          if (e && !data.demo_pool) pages.push(e.page);
        });
      });
      loadPages(pages, function () { showDetail(s); });
    });
  }

  function showDetail(s) {
    var box = $("sample-detail");
    box.textContent = "";
    box.setAttribute("data-id", s.id);
    var close = el("button", { type: "button", "class": "close" }, "close");
    close.addEventListener("click", function () { box.hidden = true; });
    box.appendChild(close);
    box.appendChild(el("h3", null, s.id));
    box.appendChild(el("p", { "class": "instr" }, s.instruction));
    box.appendChild(el("p", { "class": "help" }, [s.perspective, s.task, s.region, s.modality].filter(Boolean).join(" · ")));
    var row = el("div", { "class": "pics large" });
    row.appendChild(picture(s.pics.input, "input", false));
    row.appendChild(picture(s.pics.roi, "ROI outline", false, "no ROI mask"));
    row.appendChild(picture(s.pics.target, "target", false, "no target"));
    shownModels().forEach(function (i) {
      var r = s.runs[i];
      if (r.text && !r.output) {  // an answering model: its text is shown below
        row.appendChild(picture(null, models[i] + " output", false, "text answer (below)"));
        return;
      }
      row.appendChild(picture(r.output, models[i] + " output", false, null, r.error_short));
      row.appendChild(picture(r.diff, models[i] + " |output - input|", false, "no difference map"));
    });
    box.appendChild(row);
    // Attention heat maps (medibench analyze attention): one per model and k.
    if (s.attention && s.attention.length) {
      box.appendChild(el("h4", null, "attention grounding"));
      var arow = el("div", { "class": "pics large" });
      s.attention.forEach(function (a) {
        var cap = a.model + " k" + a.k + " '" + (a.word || "?") + "' IoU " + fmt(a.iou) +
          (a.note ? " (" + a.note + ")" : "");
        arow.appendChild(picture(a.overlay, cap, false, a.error || "no heat map"));
      });
      box.appendChild(arow);
    }
    // Text answers: each answering model's answer beside the reference.
    var texts = shownModels().filter(function (i) { return s.runs[i].text; });
    if (texts.length || s.reference) {
      box.appendChild(el("h4", null, "text answers"));
      var grid = el("div", { "class": "answers" });
      if (s.reference) {
        var ref = el("div", { "class": "answer reference" });
        ref.appendChild(el("strong", null, "reference"));
        ref.appendChild(el("pre", null, s.reference));
        grid.appendChild(ref);
      }
      texts.forEach(function (i) {
        var a = el("div", { "class": "answer" });
        a.appendChild(el("strong", null, models[i] + " (k" + s.runs[i].k + ")"));
        a.appendChild(el("pre", null, s.runs[i].text));
        grid.appendChild(a);
      });
      box.appendChild(grid);
    }
    // Scores: one table per protocol (its name on every metric column), one row per model;
    // a protocol with many metrics is split into tables of at most eight columns.
    var protocols = [];
    metrics.forEach(function (m, mi) {
      if (!shownModels().some(function (i) { return s.runs[i].v[mi] !== null; })) return;
      var last = protocols[protocols.length - 1];
      if (!last || last.label !== m[0]) { last = { label: m[0], idx: [] }; protocols.push(last); }
      last.idx.push(mi);
    });
    protocols.forEach(function (pr) {
      for (var start = 0; start < pr.idx.length; start += 8) {
        var part = pr.idx.slice(start, start + 8);
        var wrap = el("div", { "class": "scroll" });
        var t = el("table", { "class": "scores", "data-protocol": pr.label });
        var hr = el("tr");
        hr.appendChild(el("th", null, "model"));
        hr.appendChild(el("th", null, "k"));
        part.forEach(function (mi) {
          var th = el("th", { title: pr.label + " " + metrics[mi][1] });
          th.appendChild(document.createTextNode(metrics[mi][1]));
          th.appendChild(el("br"));
          th.appendChild(el("small", { "class": "protocol-label" }, pr.label));
          hr.appendChild(th);
        });
        t.appendChild(hr);
        shownModels().forEach(function (i) {
          var r = s.runs[i], tr = el("tr");
          tr.appendChild(el("td", null, models[i]));
          tr.appendChild(el("td", null, r.k));
          part.forEach(function (mi) { tr.appendChild(el("td", null, fmt(r.v[mi]))); });
          t.appendChild(tr);
        });
        wrap.appendChild(t);
        box.appendChild(wrap);
      }
    });
    // Status, errors and notes: one short line each, the whole text behind a click.
    var st = el("table", { "class": "scores status" });
    var sh = el("tr");
    ["model", "k", "status", "errors and notes"].forEach(function (h) { sh.appendChild(el("th", null, h)); });
    st.appendChild(sh);
    shownModels().forEach(function (i) {
      var r = s.runs[i], tr = el("tr");
      tr.appendChild(el("td", null, models[i]));
      tr.appendChild(el("td", null, r.k));
      tr.appendChild(el("td", { "class": r.failed ? "bad" : "" }, r.failed ? "failed" : r.status));
      var td = el("td", { "class": "small" });
      [r.error, r.score_error, r.notes].filter(Boolean).forEach(function (full) {
        var d = el("details");
        var line = full.length > 90 ? full.slice(0, 89) + "\u2026" : full;
        d.appendChild(el("summary", null, full === r.error && r.error_short ? r.error_short : line));
        d.appendChild(el("div", { "class": "full-text" }, full));
        td.appendChild(d);
      });
      tr.appendChild(td);
      st.appendChild(tr);
    });
    box.appendChild(st);
    // In-context demonstrations (--icl-k): the pool samples each output was shown, in order,
    // as thumbnails of their inputs (the run's samples', or those of its --icl-pool dataset).
    shownModels().forEach(function (i) {
      var d = s.runs[i].demos;
      if (!d || !d.length) return;
      box.appendChild(el("p", { "class": "small demos" },
        models[i] + ": in-context demonstrations " + d.join(", ")));
      var row = el("div", { "class": "pics demo-pics", "data-model": models[i] });
      var pool = data.demo_pool;
      d.forEach(function (id, n) {
        var pic = null, absent = "not in the run";
        if (pool) {
          pic = pool.pictures[id] || null;
          absent = pool.error ? "pool " + pool.spec + " not read: " + pool.error
                              : "not in pool " + pool.spec;
        } else if (entryById(id) && detailOf(entryById(id))) {
          pic = detailOf(entryById(id)).pics.input;
        }
        row.appendChild(picture(pic, "demo " + (n + 1) + ": " + id, true, absent));
      });
      box.appendChild(row);
    });
    shownModels().forEach(function (i) {
      (s.runs[i].judge || []).forEach(function (g) { box.appendChild(judgeAnswers(models[i], s.runs[i], g)); });
    });
    box.hidden = false;
    box.scrollIntoView({ block: "start" });
  }

  // What one judge (protocol and judge model) said about one output (medibench judge): a table
  // with a row per score it gives (the metrics it fills, their values, its score in each pass),
  // then each pass's status, rationale and whole answer.
  function judgeAnswers(model, r, g) {
    var about = judges[g.judge] || { fields: [], fills: [], note: null };
    var passes = g.passes.map(function (id) { return answers[id]; });
    var div = el("div", { "class": "judge", "data-judge": g.judge, "data-judge-model": g.judge_model });
    div.appendChild(el("h4", null, model + " (k" + r.k + "): " + g.judge + ", judge model " + g.judge_model));
    var prompts = {};
    passes.forEach(function (a) { prompts["prompt " + a.prompt_file + " version " + a.prompt_version] = true; });
    var how = passes.length > 1
      ? passes.length + " passes, each shown; a metric holds the mean of the ok passes' scores"
      : "one pass";
    div.appendChild(el("p", { "class": "help", title: "endpoint " + g.endpoint },
      Object.keys(prompts).concat([how], about.note ? [about.note] : []).join(" · ")));
    var t = el("table", { "class": "scores judge-scores" });
    var hr = el("tr");
    hr.appendChild(el("th", null, "judge's score"));
    hr.appendChild(el("th", { "class": "t" }, "fills"));
    passes.forEach(function (a) { hr.appendChild(el("th", null, passes.length > 1 ? "pass " + (a.pass + 1) : "score")); });
    t.appendChild(hr);
    about.fields.forEach(function (f) {
      var tr = el("tr");
      tr.appendChild(el("td", null, f[1]));
      var fills = about.fills.filter(function (x) { return x[0] === f[0]; }).map(function (x) {
        var m = metrics[x[1]];
        return m[1] + " " + fmt(r.v[x[1]]) + " (" + m[0] + (x[2] !== 1 ? ", score / " + x[2] : "") + ")";
      });
      tr.appendChild(el("td", { "class": "t" }, fills.join("; ") || "-"));
      passes.forEach(function (a) {
        var v = a.scores[f[0]];
        var shown = v === undefined ? "-" : (f[3] === "yes_no" ? (v ? "yes" : "no") : v + (f[2] !== null ? "/" + f[2] : ""));
        tr.appendChild(el("td", { title: a.problems[f[0]] || "" }, shown));
      });
      t.appendChild(tr);
    });
    var wrap = el("div", { "class": "scroll" });
    wrap.appendChild(t);
    div.appendChild(wrap);
    passes.forEach(function (a) {
      var p = el("div", { "class": "judge-pass", "data-status": a.status });
      var head = (passes.length > 1 ? "pass " + (a.pass + 1) + ": " : "") + a.status;
      p.appendChild(el("strong", { "class": a.status === "ok" ? "" : "bad" }, head));
      var problems = [];  // a refusal gives every score the same reason: shown once
      Object.keys(a.problems).forEach(function (k) {
        if (problems.indexOf(a.problems[k]) < 0) problems.push(a.problems[k]);
      });
      if (a.status !== "ok" && problems.length) p.appendChild(el("p", { "class": "judge-problems" }, problems.join("; ")));
      // A rationale that is a slice of the answer comes as [start, end] (held once).
      var said = Array.isArray(a.rationale) ? a.answer.slice(a.rationale[0], a.rationale[1]) : a.rationale;
      if (said) {
        var why = el("div", { "class": "rationale" });
        why.appendChild(el("em", null, "rationale: "));
        why.appendChild(document.createTextNode(said));
        p.appendChild(why);
      }
      else if (a.rationale === "") p.appendChild(el("p", { "class": "help" }, "no rationale: the answer holds only scores"));
      if (a.answer !== null) {
        var d = el("details");
        d.appendChild(el("summary", null, "the judge's whole answer (" + a.answer.length + " characters)"));
        d.appendChild(el("pre", { "class": "full-text" }, a.answer));
        p.appendChild(d);
      } else {
        p.appendChild(el("p", { "class": "help" }, "no answer came"));
      }
      div.appendChild(p);
    });
    return div;
  }

  function initSamples() {
    if (!$("sample-list")) return;
    fillSelect("f-task", distinct("task"));
    fillSelect("f-region", distinct("region"));
    fillSelect("f-modality", distinct("modality"));
    fillSelect("f-model", models);
    fillSelect("f-sort", metrics.map(function (_, i) { return "m" + i; }),
               metrics.map(function (m) { return "worst " + m[1] + " first (" + m[0] + ")"; }));
    if (metrics.length) { state.sort = "m0"; $("f-sort").value = "m0"; }
    ["task", "region", "modality", "model", "sort", "text"].forEach(function (k) {
      var c = $("f-" + k);
      var on = function () { state[k] = c.value; state.page = 0; render(); };
      c.addEventListener(k === "text" ? "input" : "change", on);
    });
    $("f-status").addEventListener("change", function () { state.status = this.value; state.page = 0; render(); });
    $("page-prev").addEventListener("click", function () { state.page -= 1; render(); });
    $("page-next").addEventListener("click", function () { state.page += 1; render(); });
    render();
    var m = /^#sample=(.+)$/.exec(window.location.hash);
    if (m) openDetail(decodeURIComponent(m[1]));
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), initSortable);
    Array.prototype.forEach.call(document.querySelectorAll(".table-filters[data-for]"), initTableFilters);
    Array.prototype.forEach.call(document.querySelectorAll(".column-chooser"), initColumnChooser);
    initSamples();
    window.medibenchReadyMs = performance.now();
    document.documentElement.setAttribute("data-ready", "1");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
