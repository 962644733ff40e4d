(function () {
  "use strict";
  var table = document.getElementById("class-table");
  if (!table || !table.tHead || !table.tBodies.length) return;
  var body = table.tBodies[0];
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  // The value a row sorts by in a column: data-sort when set (numbers),
  // else the cell's text.
  function key(row, col) {
    var cell = row.cells[col];
    var v = cell && cell.getAttribute("data-sort");
    if (v !== null && v !== undefined && v !== "") return parseFloat(v);
    return cell ? cell.textContent.trim().toLowerCase() : "";
  }
  function sortBy(col) {
    var th = heads[col];
    var numeric = th.getAttribute("data-type") === "num";
    var current = th.getAttribute("aria-sort");
    var dir = current ? (current === "ascending" ? -1 : 1) : (numeric ? -1 : 1);
    var rows = Array.prototype.slice.call(body.rows).map(function (r, i) { return [key(r, col), key(r, 0), i, r]; });
    rows.sort(function (a, b) {
      if (a[0] < b[0]) return -dir;
      if (a[0] > b[0]) return dir;
      if (a[1] < b[1]) return -1;
      if (a[1] > b[1]) return 1;
      return a[2] - b[2];
    });
    heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    rows.forEach(function (r) { body.appendChild(r[3]); });
  }
  heads.forEach(function (th, col) {
    var button = document.createElement("button");
    button.type = "button";
    while (th.firstChild) button.appendChild(th.firstChild);
    th.appendChild(button);
    button.addEventListener("click", function () { sortBy(col); });
  });
  // The filter: every word must match. A task's ID matches the rows that
  // lost points on it ("4.2", "failed 4.2"); other words match the row's
  // text (a name, an outcome such as "build failed").
  var ids = {};
  heads.forEach(function (th, col) {
    var id = th.getAttribute("data-task");
    if (id) ids[id.toLowerCase()] = col;
  });
  var filler = { failed: 1, fail: 1, "не": 1, "прошли": 1 };
  var input = document.getElementById("class-filter");
  function lostPoints(row, col) {
    var cell = row.cells[col];
    return cell && /lvl-(part|zero)/.test(cell.className);
  }
  function applyFilter() {
    var words = input.value.toLowerCase().split(/\s+/).filter(function (w) { return w && !filler[w]; });
    var phrase = input.value.toLowerCase().trim();
    Array.prototype.forEach.call(body.rows, function (row) {
      var text = row.textContent.toLowerCase();
      var show = text.indexOf(phrase) >= 0 || words.every(function (w) {
        return w in ids ? lostPoints(row, ids[w]) : text.indexOf(w) >= 0;
      });
      row.hidden = !show;
    });
  }
  if (input) {
    input.addEventListener("input", applyFilter);
    // A filtered view can be bookmarked or shared: report.html?q=4.2
    var q = new URLSearchParams(location.search).get("q");
    if (q) {
      input.value = q;
      applyFilter();
    }
  }
  // A link into a student's feedback opens it where it was folded.
  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (!el) return;
    for (var d = el.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
    var inner = el.querySelector && el.querySelector("details.more");
    if (inner) inner.open = true;
    el.scrollIntoView();
  }
  window.addEventListener("hashchange", reveal);
  reveal();
  // On paper every feedback is unfolded.
  window.addEventListener("beforeprint", function () {
    Array.prototype.forEach.call(document.querySelectorAll("details.more"), function (d) { d.open = true; });
  });
  document.documentElement.setAttribute("data-sortable", "on");
})();
