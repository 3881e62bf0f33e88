// The trace viewer: one page of episode rows at a time from the inline JSON
// (analysis/report/episodes.py), filtered by run, outcome and first failure; a row opens its
// decisions. Everything from the data is written as text (textContent), never as markup.
(function () {
  "use strict";
  var source = document.getElementById("viewer-data");
  var root = document.getElementById("viewer");
  if (!source || !root) { return; }
  var data = JSON.parse(source.textContent);
  var PAGE = 25;
  var RUN = 0, SEED = 1, SUCCESS = 2, FAILURE = 3, COMPLETED = 4, CALLS = 5, ERRORS = 6,
      DETAIL = 7;
  var state = { run: "all", outcome: "all", failure: "all", page: 0, selected: -1 };

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    if (cls) { node.className = cls; }
    return node;
  }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
  function outcome(row) {
    if (row[SUCCESS]) { return "success"; }
    return row[FAILURE] >= 0 ? "failure" : "no success";
  }
  function select(label, options, key) {
    var wrap = el("label", label);
    var box = document.createElement("select");
    box.id = "filter-" + key;
    options.forEach(function (option) {
      var item = el("option", option[1]);
      item.value = option[0];
      box.appendChild(item);
    });
    box.addEventListener("change", function () {
      state[key] = box.value;
      state.page = 0;
      draw(true);
    });
    wrap.appendChild(box);
    return wrap;
  }

  var controls = el("div", null, "controls");
  controls.appendChild(select("run", [["all", "all runs"]].concat(
    data.runs.map(function (name, i) { return [String(i), (i + 1) + ": " + name]; })),
    "run"));
  controls.appendChild(select("outcome", [["all", "all"], ["success", "success"],
    ["failure", "failure"], ["no success", "no success, no failure"]], "outcome"));
  controls.appendChild(select("first failure", [["all", "any"]].concat(
    data.failures.map(function (name, i) { return [String(i), name]; })), "failure"));
  var count = el("span", "", "note");
  controls.appendChild(count);
  root.appendChild(controls);

  var layout = el("div", null, "viewer");
  var left = el("div");
  var wrap = el("div", null, "scroll");
  var table = el("table");
  table.id = "episodes";
  var head = el("thead");
  var headRow = el("tr");
  var many = data.runs.length > 1;
  var names = ["#", "run", "seed", "outcome", "first failure", "completed", "calls", "errors"];
  names.forEach(function (name, c) {
    if (c !== 1 || many) { headRow.appendChild(el("th", name)); }
  });
  head.appendChild(headRow);
  table.appendChild(head);
  var body = el("tbody");
  table.appendChild(body);
  wrap.appendChild(table);
  left.appendChild(wrap);
  var pager = el("div", null, "pager controls");
  left.appendChild(pager);
  var detail = el("div");
  detail.id = "detail";
  layout.appendChild(left);
  layout.appendChild(detail);
  root.appendChild(layout);

  function matches(row) {
    if (state.run !== "all" && String(row[RUN]) !== state.run) { return false; }
    if (state.outcome !== "all" && outcome(row) !== state.outcome) { return false; }
    if (state.failure !== "all" && String(row[FAILURE]) !== state.failure) { return false; }
    return true;
  }

  function showDetail(index) {
    state.selected = index;
    detail.textContent = "";
    var row = data.episodes[index];
    var title = el("h3", "Episode " + index + " of " + data.runs[row[RUN]] +
      (row[SEED] >= 0 ? ", task seed " + row[SEED] : ""));
    detail.appendChild(title);
    detail.appendChild(el("p", outcome(row) + (row[FAILURE] >= 0 ? " (first failure: " +
      data.failures[row[FAILURE]] + ")" : "") + "; " + row[COMPLETED] + " completed, " +
      plural(row[CALLS], "call") + ", " + plural(row[ERRORS], "error"),
      outcome(row) === "success" ?
      "success" : "failure"));
    if (row[DETAIL] < 0) {
      detail.appendChild(el("p", "No decisions for this episode: its log holds the outcome " +
        "only (no trace or call lines), or it is past the caps on decisions kept (see the " +
        "notes at the top).", "empty"));
      return;
    }
    var d = data.details[row[DETAIL]];
    if (d.note) { detail.appendChild(el("p", d.note, "note")); }
    if (d.task) {
      var task = el("details");
      task.appendChild(el("summary", "public task"));
      task.appendChild(el("pre", d.task));
      detail.appendChild(task);
    }
    d.decisions.forEach(function (step, i) {
      var good = step.outcome === "ok";
      var box = el("details", null, "decision " + (good ? "good" : "bad"));
      box.open = i === 0 || !good;
      // the attribution is said only where it adds to the outcome ("dependency - dependency")
      var cause = step.attribution && !good && step.attribution !== step.outcome;
      var summary = el("summary", "decision " + i + ": " + step.action + " \u2192 " +
        step.outcome + (cause ? " \u2014 " + step.attribution : ""));
      box.appendChild(summary);
      if (d.frame && d.frame.decision === i) {
        box.appendChild(el("div", "the workflow state before this call (render_mode " +
          "rgb_array)", "label"));
        var picture = document.createElement("img");
        picture.className = "frame";
        picture.alt = "workflow state before decision " + i;
        picture.src = "data:image/png;base64," + d.frame.png;
        box.appendChild(picture);
      }
      [["observation", step.obs], ["prompt", step.prompt], ["reply", step.reply],
       ["attribution", step.attribution], ["call", step.meta]].forEach(function (part) {
        if (!part[1]) { return; }
        if (part[0] === "prompt") {
          var prompt = el("details", null, "prompt");
          prompt.appendChild(el("summary", "prompt (" + part[1].length + " characters)",
            "label"));
          prompt.appendChild(el("pre", part[1]));
          box.appendChild(prompt);
          return;
        }
        box.appendChild(el("div", part[0], "label"));
        box.appendChild(el("pre", part[1]));
      });
      detail.appendChild(box);
    });
    Array.prototype.forEach.call(body.children, function (tr) {
      tr.classList.toggle("selected", Number(tr.dataset.index) === index);
    });
  }

  function draw(reselect) {
    var shown = [];
    data.episodes.forEach(function (row, i) { if (matches(row)) { shown.push(i); } });
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    count.textContent = shown.length + " of " + data.listed + " listed episodes match (" +
      data.total + " in the inputs)";
    body.textContent = "";
    shown.slice(state.page * PAGE, (state.page + 1) * PAGE).forEach(function (i) {
      var row = data.episodes[i];
      var tr = el("tr");
      tr.dataset.index = String(i);
      var kind = outcome(row);
      [i, row[RUN] + 1, row[SEED] >= 0 ? row[SEED] : "-", kind,
       row[FAILURE] >= 0 ? data.failures[row[FAILURE]] : "-", row[COMPLETED], row[CALLS],
       row[ERRORS]].forEach(function (value, c) {
        if (c === 1 && !many) { return; }
        var td = el("td", value, c === 3 ? "outcome " + (kind === "no success" ? "none" :
          kind) : (c === 4 ? "" : "num"));
        if (c === 1) { td.title = data.runs[row[RUN]]; }
        tr.appendChild(td);
      });
      if (row[DETAIL] < 0) { tr.className = "bare"; }
      tr.addEventListener("click", function () { showDetail(i); });
      body.appendChild(tr);
    });
    pager.textContent = "";
    var prev = el("button", "\u2190 previous");
    prev.disabled = state.page === 0;
    prev.addEventListener("click", function () { state.page -= 1; draw(false); });
    var next = el("button", "next \u2192");
    next.disabled = state.page >= pages - 1;
    next.addEventListener("click", function () { state.page += 1; draw(false); });
    pager.appendChild(prev);
    pager.appendChild(el("span", "page " + (state.page + 1) + " of " + pages));
    pager.appendChild(next);
    if (reselect) {
      var first = shown.filter(function (i) { return data.episodes[i][DETAIL] >= 0; })[0];
      if (first === undefined) { first = shown[0]; }
      if (first === undefined) {
        detail.textContent = "";
        detail.appendChild(el("p", "No episode matches the filters.", "empty"));
      } else {
        showDetail(first);
      }
    } else if (state.selected >= 0) {
      showDetail(state.selected);
    }
  }
  draw(true);
}());
