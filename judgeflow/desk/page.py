"""The review page: one item at a time, blind first, keyboard first; every text from a judge shown as text.

p / f / u choose pass / fail / unclear; before the reveal that choice is the blind verdict, after it the final
one. Enter confirms (Ctrl+Enter from the note), s skips, ? shows the keys. The judges' verdicts, scores and
confidences are not in the page until the blind choice is recorded: the API does not send them before. An
evaluation run is scored the same way: a score per lane and overall first, then the judges' scores.
"""

from __future__ import annotations

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>judgeflow review desk</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:.6rem 1.2rem;display:flex;gap:1.6rem;flex-wrap:wrap;align-items:baseline}
header h1{font-size:1.05rem;margin:0 1rem 0 0} header span b{font-variant-numeric:tabular-nums}
main{max-width:60rem;margin:1rem auto;padding:0 1rem}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:.8rem 1rem;margin-bottom:.8rem}
h2{font-size:.8rem;text-transform:uppercase;letter-spacing:.05em;color:#5b6478;margin:0 0 .4rem}
#claim{font-size:1.15rem;font-weight:600} #passage{white-space:pre-wrap} mark{background:#ffe58a}
.warn{background:#fff1f0;border:1px solid #f5a3a0;color:#8a1c17;padding:.3rem .6rem;border-radius:4px}
.judge{border-top:1px solid #eef0f4;padding:.4rem 0} .judge:first-child{border-top:0}
.choices button{font-size:1rem;padding:.45rem 1rem;margin-right:.5rem;border-radius:4px;
  border:1px solid #aab2c0;background:#fff}
.choices button.on{background:#1d2330;color:#fff} .verdict{font-weight:600}
#message{min-height:1.4rem} .error{color:#8a1c17} .ok{color:#17622e}
#help{position:fixed;right:1rem;top:3.5rem;background:#fff;border:1px solid #aab2c0;padding:.6rem 1rem;
  border-radius:6px}
textarea{width:100%;min-height:3.5rem;font:inherit} [hidden]{display:none!important} .muted{color:#5b6478}
</style></head>
<body>
<header><h1>Review desk</h1>
<span>reviewer <b id="reviewer">-</b></span><span>reviewed today <b id="today">-</b></span>
<span>queue <b id="depth">-</b></span><span>oldest <b id="oldest">-</b></span>
<span>to empty <b id="to-empty">-</b></span><span class="muted">? for keys</span>
<button id="sign-out" hidden>Sign out</button></header>
<main>
<div id="empty" hidden><section><p>The queue is empty. This page checks again every 10 s.</p></section></div>
<div id="item" hidden>
<section><h2>Claim <span id="claim-id"></span> <span id="source" class="muted"></span></h2>
<div id="claim"></div></section>
<section><h2>Passage</h2><p id="quote-warning" class="warn" hidden>The judge's quoted passage is not in the
passage: check the quote before trusting the reason.</p><div id="passage"></div></section>
<section><h2>What the judges said</h2><div id="reasons"></div></section>
<section id="verdicts" hidden><h2>The judges' verdicts (shown after your choice)</h2><div id="judges"></div>
<p>Routed <span id="route" class="verdict"></span> with the verdict <span id="decided" class="verdict"></span>.</p>
</section>
<section><h2 id="phase">Your verdict, before you see the judges'</h2>
<div class="choices"><button data-v="pass">Pass (p)</button><button data-v="fail">Fail (f)</button>
<button data-v="unclear">Unclear (u)</button></div>
<div id="note-box" hidden><p>Note <span id="note-needed" class="muted"></span></p><textarea id="note"></textarea></div>
<p><button id="confirm" hidden>Confirm (Enter)</button> <button id="skip">Skip (s)</button></p>
<div id="message"></div></section>
</div>
<div id="run" hidden>
<section><h2>Evaluation run <span id="run-id"></span> <span class="muted">(routed: <span id="run-reason"></span>)</span>
</h2><p>Submission <span id="submission"></span>. The judges contradict each other on
<b id="contradicted"></b>.</p></section>
<section><h2>What the judges said</h2><div id="run-reasons"></div></section>
<section id="run-scores" hidden><h2>The judges' scores (shown after yours)</h2><div id="run-judges"></div>
<p>Reconciled overall <span id="reconciled" class="verdict"></span>.</p></section>
<section><h2 id="run-phase">Your scores, before you see the judges'</h2>
<div id="lanes"></div><p><label>Overall <input id="overall" type="number" min="0" max="100" step="1"></label></p>
<div id="run-note-box" hidden><p>Note <span id="run-note-needed" class="muted"></span></p>
<textarea id="run-note"></textarea></div>
<p><button id="run-go">Show the judges' scores (Enter)</button> <button id="run-skip">Skip</button></p>
<div id="run-message"></div></section>
</div>
<div id="help" hidden><b>Keys</b><br>p / f / u: pass / fail / unclear<br>Enter: confirm (Ctrl+Enter in the note)
<br>s: skip this item<br>?: this help<br>A run: type a score per lane and overall, Enter to
show the judges' scores, Enter again to confirm</div>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let lease = null, phase = "none", choice = null, decided = null, renewer = null, busy = false, kind = "claim";
let reconciled = null;

let csrf = null;
async function call(method, path, body) {
  const headers = {"Content-Type": "application/json"};
  if (csrf) headers["X-CSRF-Token"] = csrf;
  const r = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  if (r.status === 204) return null;
  const doc = await r.json().catch(() => ({code: "HTTP_" + r.status, message: r.statusText}));
  if (!r.ok) throw doc;
  return doc;
}
function say(text, cls) {
  const m = $(kind === "run" ? "run-message" : "message"); m.textContent = text; m.className = cls || "";
}
function age(s) {
  if (s === null || s === undefined) return "-";
  if (s < 120) return Math.round(s) + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}
async function stats() {
  try {
    const s = await call("GET", "/api/review/stats");
    $("reviewer").textContent = s.reviewer; $("today").textContent = s.reviewed_today;
    $("depth").textContent = s.depth; $("oldest").textContent = age(s.oldest_age_seconds);
    $("to-empty").textContent = s.hours_to_empty === null ? "not measured yet"
      : s.hours_to_empty + " h at " + s.median_seconds + " s per review";
  } catch (e) { say(e.message || "stats unavailable", "error"); }
}
function showPassage(passage, quote) {
  const box = $("passage"); box.textContent = "";
  const at = quote ? passage.indexOf(quote) : -1;
  $("quote-warning").hidden = !quote || at >= 0;
  if (at < 0) { box.textContent = passage; return; }
  const mark = document.createElement("mark"); mark.textContent = quote;
  box.append(passage.slice(0, at), mark, passage.slice(at + quote.length));
}
function line(parent, parts) {
  const div = document.createElement("div"); div.className = "judge";
  for (const [label, value, cls] of parts) {
    const b = document.createElement("b"); b.textContent = label; div.append(b, " ");
    const s = document.createElement("span"); s.textContent = value; if (cls) s.className = cls; div.append(s, " ");
  }
  parent.append(div);
}
function mark() {
  for (const b of document.querySelectorAll(".choices button")) b.classList.toggle("on", b.dataset.v === choice);
  const needed = phase === "reveal" && choice !== decided;
  $("note-box").hidden = phase !== "reveal";
  $("note-needed").textContent = needed ? "(required: your verdict overturns the judge's)" : "(optional)";
  $("confirm").hidden = phase !== "reveal";
}
async function next() {
  clearInterval(renewer); lease = null; phase = "none"; choice = null; decided = null;
  say(""); $("note").value = ""; $("verdicts").hidden = true;
  let got;
  try { got = await call("POST", "/api/review/next"); }
  catch (e) { say(e.message || "the desk is unavailable", "error"); setTimeout(next, 10000); return; }
  stats();
  if (!got) { $("item").hidden = true; $("empty").hidden = false; setTimeout(next, 10000); return; }
  $("empty").hidden = true;
  lease = got.lease_id; phase = "blind";
  const it = got.item;
  kind = it.kind; $("item").hidden = kind !== "claim"; $("run").hidden = kind !== "run";
  renewer = setInterval(() => lease && call("POST", "/api/review/" + lease + "/renew").catch(() => {}), 60000);
  if (kind === "run") { showRun(it); return; }
  $("source").textContent = "(" + it.source + ")"; $("claim-id").textContent = it.claim_id;
  $("claim").textContent = it.claim_text;
  showPassage(it.passage, it.passage_quote);
  const reasons = $("reasons"); reasons.textContent = "";
  for (const j of it.judges) {
    line(reasons, [["Judge", j.judge_id], ["Reason", j.reason], ["Quote", j.passage_quote || "-"]]);
  }
  $("phase").textContent = "Your verdict, before you see the judges'";
  mark();
}
function showRun(it) {
  reconciled = null;
  $("run-id").textContent = it.evaluation_run_id; $("run-reason").textContent = it.reason || "-";
  $("submission").textContent = it.submission_id;
  $("contradicted").textContent = it.contradicted_lanes.length ? it.contradicted_lanes.join(", ") : "no lane";
  const reasons = $("run-reasons"); reasons.textContent = "";
  for (const j of it.judges) line(reasons, [["Judge", j.judge_id], ["Status", j.status],
    ["Strength", j.positive_signal || "-"], ["Weakness", j.primary_weakness || "-"]]);
  const lanes = $("lanes"); lanes.textContent = "";
  for (const key of it.lanes) {
    const p = document.createElement("p"), label = document.createElement("label");
    const input = document.createElement("input");
    input.type = "number"; input.min = "0"; input.max = "100"; input.step = "1"; input.dataset.lane = key;
    label.append(key + " ", input); p.append(label); lanes.append(p);
  }
  $("overall").value = ""; $("run-note").value = ""; $("run-scores").hidden = true; $("run-note-box").hidden = true;
  $("run-phase").textContent = "Your scores, before you see the judges'";
  $("run-go").textContent = "Show the judges' scores (Enter)";
  const first = lanes.querySelector("input"); if (first) first.focus();
}
function runScores() {
  const lane_scores = {};
  for (const input of document.querySelectorAll("#lanes input")) lane_scores[input.dataset.lane] = Number(input.value);
  return {lane_scores, overall: Number($("overall").value)};
}
function fail(e) { say((e.code ? e.code + ": " : "") + (e.message || "failed"), "error"); }
async function runGo() {
  if (busy || !lease) return;
  busy = true;
  try {
    if (phase === "blind") {
      const r = await call("POST", "/api/review/" + lease + "/blind", runScores());
      const box = $("run-judges"); box.textContent = "";
      for (const j of r.judges) line(box, [["Judge", j.judge_id], ["Overall", j.overall_score === null ? "-" :
        j.overall_score], ["Lanes", Object.entries(j.lane_scores).map(([k, v]) => k + " " + v).join(", ")]]);
      reconciled = r.reconciled.overall; $("reconciled").textContent = reconciled === null ? "-" : reconciled;
      $("run-scores").hidden = false; $("run-note-box").hidden = false; phase = "reveal";
      $("run-note-needed").textContent = "(required when your overall differs from the reconciled one)";
      $("run-phase").textContent = "Your final scores: confirm or change";
      $("run-go").textContent = "Confirm (Enter)";
      say("");
    } else {
      say("sending...");
      const note = $("run-note").value.trim();
      const r = await call("POST", "/api/review/" + lease + "/submit", {...runScores(), note: note || null});
      say("recorded: review " + r.review_id, "ok"); busy = false; await next(); return;
    }
  } catch (e) { fail(e); }
  busy = false;
}
async function choose(v) {
  if (busy || !lease) return;
  if (phase === "reveal") { choice = v; mark(); return; }
  busy = true;
  try {
    const r = await call("POST", "/api/review/" + lease + "/blind", {verdict: v});
    choice = r.blind_verdict; decided = r.decision.verdict; phase = "reveal";
    const box = $("judges"); box.textContent = "";
    for (const j of r.judges) line(box, [["Judge", j.judge_id], ["Verdict", j.verdict, "verdict"],
      ["Score", j.score === null ? "-" : j.score], ["Confidence", j.confidence]]);
    $("route").textContent = r.decision.route || "-"; $("decided").textContent = decided || "-";
    $("verdicts").hidden = false;
    $("phase").textContent = "Your final verdict: confirm or change";
    mark();
  } catch (e) { say((e.code ? e.code + ": " : "") + (e.message || "failed"), "error"); }
  busy = false;
}
async function confirm() {
  if (busy || phase !== "reveal") return;
  busy = true; say("sending...");
  try {
    const note = $("note").value.trim();
    const r = await call("POST", "/api/review/" + lease + "/submit", {final_verdict: choice, note: note || null});
    say("recorded: review " + r.review_id, "ok"); busy = false; await next();
  } catch (e) { say((e.code ? e.code + ": " : "") + (e.message || "failed"), "error"); busy = false; }
}
async function skip() {
  if (busy || !lease) return;
  try { await call("POST", "/api/review/" + lease + "/skip"); } catch (e) {}
  await next();
}
for (const b of document.querySelectorAll(".choices button")) b.addEventListener("click", () => choose(b.dataset.v));
$("confirm").addEventListener("click", confirm);
$("skip").addEventListener("click", skip);
$("run-go").addEventListener("click", runGo);
$("run-skip").addEventListener("click", skip);
document.addEventListener("keydown", (e) => {
  if (kind === "run") {
    if (e.key === "Enter" && (e.target !== $("run-note") || e.ctrlKey)) { e.preventDefault(); runGo(); }
    return;
  }
  const typing = e.target === $("note");
  if (e.key === "Enter" && (!typing || e.ctrlKey)) { e.preventDefault(); confirm(); return; }
  if (typing) return;
  const v = {p: "pass", f: "fail", u: "unclear"}[e.key];
  if (v) { e.preventDefault(); choose(v); }
  else if (e.key === "s") { e.preventDefault(); skip(); }
  else if (e.key === "?") { $("help").hidden = !$("help").hidden; }
});
async function signOut() {
  try { await call("POST", "/logout"); } catch (e) {}
  location.href = "/login";
}
$("sign-out").addEventListener("click", signOut);
(async () => {
  try { const s = await call("GET", "/api/session"); csrf = s.csrf; $("sign-out").hidden = !csrf; }
  catch (e) { say(e.message || "not signed in", "error"); }
  next();
})();
</script></body></html>
"""
