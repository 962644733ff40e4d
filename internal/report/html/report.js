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
  document.documentElement.setAttribute("data-sortable", "on");
})();
