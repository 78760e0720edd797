// job-chain console: charts (uPlot), log scrolling and file import. Everything else is htmx.
// Every value shown (error texts, names, job ids) goes in as text, never as HTML: it may come
// from a run record or an API answer that someone else wrote.
(function () {
  "use strict";
  var PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d"];
  var UNITS = {CpuUsage: "CPU %", MemoryUsage: "memory %", GpuUsage: "GPU %", GpuMemoryUsage: "GPU memory %"};

  function number(v) {
    // small values (learning rates) in exponent form, others with at most 4 significant digits
    if (v === null || v === undefined) return "";
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(1);
    return String(+v.toPrecision(4));
  }

  function utcText(seconds, span) {
    // "2026-11-29 13:05:09 UTC" for a value (span 0), else a tick: "13:05", "13:05:09", "11-29 13:05"
    var iso = new Date(seconds * 1000).toISOString();
    if (!span) return iso.slice(0, 10) + " " + iso.slice(11, 19) + " UTC";
    if (span > 86400) return iso.slice(5, 10) + " " + iso.slice(11, 16);
    return span > 600 ? iso.slice(11, 16) : iso.slice(11, 19);
  }

  function chart(box, title, xs, series, timeAxis) {
    // series: [{label, y: [...]}] sharing xs
    var holder = document.createElement("div");
    holder.className = "chart";
    holder.dataset.title = title;
    box.appendChild(holder);
    var width = Math.max(280, Math.min(560, box.clientWidth - 10));
    var opts = {
      title: title, width: width, height: 220,
      scales: {x: {time: !!timeAxis}},
      series: [timeAxis ? {label: "time (UTC)", value: function (u, v) { return v == null ? "" : utcText(v, 0); }}
                        : {label: "iteration"}].concat(series.map(function (s, i) {
        return {label: s.label, stroke: PALETTE[i % PALETTE.length], width: 1.5, points: {show: xs.length < 60}};
      })),
      axes: [timeAxis ? {values: function (u, vals) {
        // 24-hour UTC, as every time on the page: the date only when the chart spans days
        var span = u.scales.x.max - u.scales.x.min;
        var labels = vals.map(function (v) { return utcText(v, span); });
        holder.dataset.ticks = labels.join(",");
        return labels;
      }} : {}, {size: 70, values: function (u, vals) { return vals.map(number); }}],
      hooks: {setScale: [function (u, key) {
        if (key === "x") holder.dataset.span = String(u.scales.x.max - u.scales.x.min);  // what the x axis covers
      }]}
    };
    if (timeAxis) opts.tzDate = function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); };
    var plot = new uPlot(opts, [xs].concat(series.map(function (s) { return s.y; })), holder);
    if (xs.length && xs[0] === xs[xs.length - 1]) {
      // one sample: uPlot would stretch a time axis over years (2027-2029 for one point); a
      // minute either side of it (one iteration on an iteration axis) shows where it is
      var pad = timeAxis ? 60 : 1;
      plot.setScale("x", {min: xs[0] - pad, max: xs[0] + pad});
    }
    return plot;
  }

  function alignPods(pods) {
    // metrics per pod have their own timestamps: join them on one x axis (null where a pod has none)
    var names = Object.keys(pods), all = {};
    names.forEach(function (n) { pods[n].x.forEach(function (t) { all[t] = true; }); });
    var xs = Object.keys(all).map(Number).sort(function (a, b) { return a - b; });
    var index = {};
    xs.forEach(function (t, i) { index[t] = i; });
    var series = names.map(function (n) {
      var y = xs.map(function () { return null; });
      pods[n].x.forEach(function (t, i) { y[index[t]] = pods[n].y[i]; });
      return {label: n, y: y};
    });
    return {xs: xs, series: series};
  }

  function say(box, cls, text) {
    // one paragraph of plain text in place of the box's content
    var p = document.createElement("p");
    p.className = cls;
    p.textContent = text;
    box.replaceChildren(p);
  }

  function draw(box, data) {
    box.replaceChildren();
    var kind = box.dataset.kind, drawn = 0;
    if (kind === "curves") {
      Object.keys(data.curves || {}).forEach(function (name) {
        var c = data.curves[name];
        chart(box, name, c.x, [{label: name, y: c.y}], false);
        drawn++;
      });
      if (!drawn) say(box, "muted", "No training curves in this log (loss, learning rate, throughput as Megatron prints them, or the patterns in jobChain.metrics)" + (data.error ? ": " + data.error : "."));
      else if (data.error) { var note = document.createElement("p"); note.className = "muted"; note.textContent = data.error; box.appendChild(note); }
    } else {
      Object.keys(data.metrics || {}).forEach(function (metric) {
        var joined = alignPods(data.metrics[metric]);
        chart(box, UNITS[metric] || metric, joined.xs, joined.series, true);
        drawn++;
      });
      if (!drawn) say(box, "muted", "No monitoring samples for this job" + (data.error ? ": " + data.error : "."));
    }
    box.dataset.drawn = String(drawn);
  }

  function load(box) {
    if (!document.body.contains(box)) return;
    fetch(box.dataset.src, {credentials: "same-origin"}).then(function (r) { return r.json(); }).then(function (data) {
      if (!document.body.contains(box)) return;
      draw(box, data);
      if (data.live) setTimeout(function () { load(box); }, 10000);
    }).catch(function (err) { say(box, "error", "charts: " + err); });
  }

  function scan(root) {
    (root || document).querySelectorAll(".charts[data-src]").forEach(function (box) {
      if (box.dataset.started) return;
      box.dataset.started = "1";
      load(box);
    });
    var log = document.getElementById("log-text");
    if (log && !log.dataset.scrolled) { log.scrollTop = log.scrollHeight; log.dataset.scrolled = "1"; }
  }

  // a matrix's points stay expanded (or not) across the live refreshes of the run page
  var OPEN = "job-chain-open-matrices";
  function openGroups() {
    try { return JSON.parse(sessionStorage.getItem(OPEN) || "{}"); } catch (e) { return {}; }
  }
  function showGroups(root) {
    var open = openGroups();
    (root || document).querySelectorAll("tr.group-row").forEach(function (row) {
      var key = location.pathname + "|" + row.dataset.group, shown = !!open[key];
      row.querySelector("button.expand").textContent = shown ? "▾" : "▸";
      row.querySelector("button.expand").setAttribute("aria-expanded", String(shown));
      document.querySelectorAll('tr.point-row[data-group="' + row.dataset.group + '"]').forEach(function (tr) {
        tr.classList.toggle("shown", shown);
      });
    });
  }
  document.addEventListener("click", function (e) {
    var button = e.target && e.target.closest && e.target.closest("tr.group-row button.expand");
    if (!button) return;
    var open = openGroups(), key = location.pathname + "|" + button.closest("tr").dataset.group;
    if (open[key]) delete open[key]; else open[key] = true;
    sessionStorage.setItem(OPEN, JSON.stringify(open));
    showGroups(document);
  });
  document.addEventListener("DOMContentLoaded", function () { showGroups(document); });
  document.addEventListener("htmx:afterSettle", function () { showGroups(document); });

  document.addEventListener("DOMContentLoaded", function () { scan(document); });
  document.body && document.body.addEventListener("htmx:afterSettle", function (e) { scan(e.target); });
  document.addEventListener("htmx:afterSettle", function (e) { scan(e.target); });

  // the runs list's poll says which rows it shows (id:digest): the answer is nothing when none
  // changed, else only the rows that did (or the page's rows when the runs shown are others)
  document.addEventListener("htmx:configRequest", function (e) {
    var elt = e.detail.elt;
    if (!elt || elt.id !== "runs-body") return;
    var seen = [];
    elt.querySelectorAll("tr[data-digest]").forEach(function (tr) { seen.push(tr.id + ":" + tr.dataset.digest); });
    e.detail.parameters.seen = seen.join(",");
  });
  // a filter of the runs list: its first page, as a page of its own (the address says what it shows)
  document.addEventListener("change", function (e) {
    var form = e.target && e.target.closest && e.target.closest("form#filter");
    if (!form) return;
    form.elements.page.value = "0";
    form.submit();
  });

  document.addEventListener("change", function (e) {
    if (e.target && e.target.id === "import" && e.target.files.length) {
      var file = e.target.files[0];
      var reader = new FileReader();
      reader.onload = function () {
        document.getElementById("chain").value = reader.result;
        var name = document.getElementById("name");
        if (/^[A-Za-z0-9][A-Za-z0-9._-]*\.json$/.test(file.name)) name.value = file.name;
        htmx.trigger("#submit-form", "submit");
      };
      reader.readAsText(file);
    }
  });
})();
