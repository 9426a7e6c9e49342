// tokimq web console: reads /api/* every 2 s and draws tables and SVG bar charts.
// No framework, no external file (docs/console.md).
'use strict';
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
const num = (n) => Number(n).toLocaleString('en-US');
const rate = (r) => (r < 10 ? r.toFixed(1) : Math.round(r).toLocaleString('en-US'));
function bytes(n) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB']; let i = 0; n = Number(n);
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}
function duration(ms) {
  const s = Math.floor(ms / 1000), d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  return d ? `${d}d ${h}h` : h ? `${h}h ${m}m` : m ? `${m}m ${s % 60}s` : `${s}s`;
}
function authHeaders() {
  const ak = $('ak').value, sk = $('sk').value;
  return ak ? { Authorization: 'Basic ' + btoa(ak + ':' + sk) } : {};
}
async function get(path) {
  const r = await fetch(path, { cache: 'no-store' });
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.status);
  return j;
}
async function post(path, body) {
  const r = await fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json', ...authHeaders() }, body: JSON.stringify(body) });
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.status);
  return j;
}

// Bars of `values` in an SVG; labels: every `labelEvery`-th bar gets label(i).
function bars(el, values, label, labelEvery, cls) {
  const w = 1000, h = 120, pad = 16, max = Math.max(1, ...values), bw = w / Math.max(1, values.length);
  let s = `<svg viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" role="img">`;
  values.forEach((v, i) => {
    const bh = v ? Math.max(1, (h - pad) * v / max) : 0;
    s += `<rect class="${cls || ''}" x="${i * bw + 0.5}" y="${h - pad - bh}" width="${Math.max(1, bw - 1)}" height="${bh}" data-i="${i}" data-v="${v}"><title>${esc(label(i))}: ${num(v)}</title></rect>`;
    if (i % labelEvery === 0) s += `<text x="${i * bw}" y="${h - 3}">${esc(label(i))}</text>`;
  });
  s += `<text x="${w - 4}" y="11" text-anchor="end">max ${num(max)}</text></svg>`;
  el.innerHTML = s;
}

function drawOverview(o) {
  $('version').textContent = o.version + (o.manual_clock ? ' (manual clock)' : '');
  $('ov-uptime').textContent = duration(o.uptime_ms);
  $('ov-sent').textContent = rate(o.rates.sent_per_s);
  $('ov-released').textContent = rate(o.rates.released_per_s);
  $('ov-pending').textContent = num(o.timer.pending);
  $('ov-inflight').textContent = num(o.in_flight);
  $('ov-dlq').textContent = num(o.dlq_total);
  $('ov-disk').textContent = bytes(o.disk.free_bytes);
  $('ov-disk-label').textContent = `disk free of ${bytes(o.disk.total_bytes)} (${o.disk.state})`;
  $('ov-commitlog').textContent = bytes(o.commitlog.max_offset - o.commitlog.min_offset);
}
function drawTopics(t) {
  $('topic-count').textContent = `(${t.topic_count})`;
  $('topic-rows').innerHTML = t.topics.map((x) => `<tr data-topic="${esc(x.name)}"><td>${esc(x.name)}</td><td>${x.type}</td>` +
    `<td class="n depth">${num(x.depth)}</td><td class="n sent">${num(x.sent)}</td><td class="n">${rate(x.rate_per_s)}</td></tr>`).join('');
}
let dlqGroups = [];
function drawGroups(g) {
  $('group-count').textContent = `(${g.group_count})`;
  $('group-rows').innerHTML = g.groups.map((x) => `<tr data-group="${esc(x.group)}"><td>${esc(x.group)}</td>` +
    `<td>${esc(x.topic_stats.map((t) => `${t.topic} (lag ${num(t.lag)})`).join(', ') || x.topics.join(', '))}</td>` +
    `<td class="n lag">${num(x.lag)}</td><td class="n inflight">${num(x.in_flight)}</td>` +
    `<td class="n age" data-ms="${x.oldest_unacked_age_ms}">${x.oldest_unacked_age_ms ? duration(x.oldest_unacked_age_ms) : '–'}</td>` +
    `<td class="n parked">${num(x.parked)}</td><td class="n dlq">${num(x.dlq_depth)}</td><td class="n">${num(x.acked)}</td></tr>`).join('');
  const names = g.groups.map((x) => x.group);
  if (names.join() !== dlqGroups.join()) {
    const cur = $('dlq-group').value;
    dlqGroups = names;
    $('dlq-group').innerHTML = names.map((n) => `<option${n === cur ? ' selected' : ''}>${esc(n)}</option>`).join('');
  }
}
function drawTimer(t) {
  const at = (ms) => new Date(t.now_ms + ms).toISOString().slice(11, 16);
  $('timer-summary').innerHTML = `pending <b id="tm-pending">${num(t.pending)}</b> · delivered <b id="tm-delivered">${num(t.delivered)}</b> · ` +
    `recalled ${num(t.recalled)} · rolled ${num(t.rolled)} · due later than a week <b id="tm-later">${num(t.per_hour.later)}</b> · ` +
    `lateness p50 ${t.lateness.p50_ms} ms, p99 <b id="tm-p99">${t.lateness.p99_ms}</b> ms, max ${t.lateness.max_ms} ms (UTC times)`;
  bars($('chart-minutes'), t.per_minute.counts, (i) => (i ? `+${i}m ${at(i * 60000)}` : 'now'), 10);
  bars($('chart-hours'), t.per_hour.counts, (i) => (i % 24 ? `+${i}h` : `+${i / 24}d ${at(i * 3600000)}`), 24);
  const lb = t.lateness.buckets;
  bars($('chart-lateness'), lb.map((b) => b.count), (i) => `≤${lb[i].upper_ms} ms`, Math.max(1, Math.ceil(lb.length / 8)), 'late');
}
let lastDlq = '';
async function drawDlq() {
  const group = $('dlq-group').value;
  if (!group) { $('dlq-rows').innerHTML = ''; lastDlq = ''; $('dlq-info').textContent = 'no consumer group yet'; return; }
  const d = await get('/api/dlq?group=' + encodeURIComponent(group) + '&limit=50');
  const key = JSON.stringify(d);
  if (key === lastDlq) return;  // unchanged: keep the rows (and a resend's result) as they are
  lastDlq = key;
  $('dlq-info').textContent = `${d.topic}: offsets ${d.min_offset}..${d.max_offset - 1}, newest ${d.messages.length} shown`;
  $('dlq-rows').innerHTML = d.messages.map((m) => `<tr data-offset="${m.queue_offset}"><td class="n">${m.queue_offset}</td><td>${esc(m.id)}</td>` +
    `<td>${esc(m.properties.ORIGIN_TOPIC || '')}</td><td>${esc(m.key)} ${esc(m.tag)}</td>` +
    `<td class="props">${esc(Object.entries(m.properties).map(([k, v]) => k + '=' + v).join(' '))}</td>` +
    `<td><pre>${esc(m.body_preview)}</pre></td><td><button class="resend" data-group="${esc(group)}" data-offset="${m.queue_offset}">resend</button> <span class="result"></span></td></tr>`).join('');
}
$('dlq-rows').addEventListener('click', async (e) => {
  const b = e.target.closest('button.resend'); if (!b) return;
  const out = b.parentElement.querySelector('.result');
  try {
    const r = await post('/api/dlq/resend', { group: b.dataset.group, offset: Number(b.dataset.offset) });
    out.className = 'result ok'; out.textContent = `sent to ${r.topic} as ${r.message_id}`;
  } catch (err) { out.className = 'result err'; out.textContent = err.message; }
});
$('dlq-group').addEventListener('change', () => drawDlq().catch(() => {}));

function messageRow(m) {
  const when = m.scheduled ? `due ${new Date(m.deliver_ms).toISOString()} · recall handle <code>${esc(m.recall_handle)}</code>` : `stored ${new Date(m.store_ms).toISOString()}`;
  return `<div class="msg"><b>${esc(m.id)}</b> ${esc(m.topic)}[${m.queue_id}]@${m.queue_offset} · ${when}<div class="props">${esc(Object.entries(m.properties).map(([k, v]) => k + '=' + v).join(' '))}</div><pre>${esc(m.body_preview)}</pre></div>`;
}
$('lookup-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  try {
    const r = await get(`/api/message?${$('lookup-by').value}=` + encodeURIComponent($('lookup-text').value));
    $('lookup-out').innerHTML = `<p class="muted">${r.messages.length} found among the ${num(r.scanned)} newest entries scanned</p>` + r.messages.map(messageRow).join('');
  } catch (err) { $('lookup-out').innerHTML = `<p class="err">${esc(err.message)}</p>`; }
});
$('recall-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  try {
    await post('/api/recall', { handle: $('recall-handle').value.trim() });
    $('recall-out').innerHTML = '<p class="ok">recalled: it will not be delivered</p>';
  } catch (err) { $('recall-out').innerHTML = `<p class="err">${esc(err.message)}</p>`; }
});

async function refresh() {
  try {
    const [o, t, g, tm] = await Promise.all(['/api/overview', '/api/topics', '/api/groups', '/api/timer'].map(get));
    drawOverview(o); drawTopics(t); drawGroups(g); drawTimer(tm);
    await drawDlq();
    $('status').textContent = 'updated ' + new Date().toLocaleTimeString();
    document.body.dataset.loaded = '1';
  } catch (err) { $('status').textContent = 'error: ' + err.message; }
}
refresh();
setInterval(refresh, 2000);
