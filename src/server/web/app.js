// tessera serve's page: streams chat answers from /v1/chat/completions (server-sent events read from fetch) and
// redraws the cluster from /health once a second. Plain browser JavaScript: nothing to build, nothing fetched
// from elsewhere. Model text is only ever put in the page as text, never as HTML.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const conversation = [];  // {role, content} sent with each request
  let controller = null;    // aborts the running stream (the server then cancels the request)
  const history = [];       // recent decode tokens/s for the sparkline

  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };

  const bytes = (n) => {
    if (!n) return '0 B';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    const i = Math.min(units.length - 1, Math.floor(Math.log(n) / Math.log(1024)));
    return (n / 1024 ** i).toFixed(i ? 1 : 0) + ' ' + units[i];
  };

  const keyHeader = () => {
    const key = $('api-key').value.trim();
    return key ? {Authorization: 'Bearer ' + key} : {};
  };

  // ---- chat ----

  function addMessage(role, text) {
    const m = el('div', 'msg ' + role);
    m.appendChild(el('div', 'role', role));
    const body = el('div', 'content', text);
    m.appendChild(body);
    $('messages').appendChild(m);
    $('messages').scrollTop = $('messages').scrollHeight;
    return body;
  }

  function setBusy(busy) {
    $('send').disabled = busy;
    $('stop').disabled = !busy;
  }

  // Splits an SSE byte stream into `data:` payloads; calls onData for each complete event.
  function sseReader(onData) {
    let buffer = '';
    return (chunk) => {
      buffer += chunk;
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart());
        if (data.length) onData(data.join('\n'));
      }
    };
  }

  async function send(text) {
    conversation.push({role: 'user', content: text});
    addMessage('user', text);
    const out = addMessage('assistant', '');
    out.parentElement.classList.add('streaming');
    setBusy(true);
    controller = new AbortController();
    let answer = '';
    const body = {
      messages: conversation,
      stream: true,
      temperature: Number($('temperature').value),
      max_tokens: Number($('max-tokens').value),
    };
    try {
      const res = await fetch('/v1/chat/completions', {
        method: 'POST',
        headers: Object.assign({'Content-Type': 'application/json'}, keyHeader()),
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!res.ok) {
        const err = await res.json().catch(() => ({}));
        throw new Error((err.error && err.error.message) || res.status + ' ' + res.statusText);
      }
      const decoder = new TextDecoder();
      const reader = res.body.getReader();
      const feed = sseReader((data) => {
        if (data === '[DONE]') return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        const choice = chunk.choices && chunk.choices[0];
        if (choice && choice.delta && choice.delta.content) {
          answer += choice.delta.content;
          out.textContent = answer;
          $('messages').scrollTop = $('messages').scrollHeight;
        }
        if (choice && choice.finish_reason) out.parentElement.dataset.finish = choice.finish_reason;
      });
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        feed(decoder.decode(value, {stream: true}));
      }
    } catch (e) {
      if (e.name !== 'AbortError') {
        out.parentElement.classList.add('error');
        out.textContent = answer + (answer ? '\n' : '') + '[' + e.message + ']';
      }
    } finally {
      out.parentElement.classList.remove('streaming');
      out.parentElement.classList.add('done');
      conversation.push({role: 'assistant', content: answer});
      controller = null;
      setBusy(false);
    }
  }

  $('chat-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const text = $('prompt').value.trim();
    if (!text || controller) return;
    $('prompt').value = '';
    send(text);
  });
  $('prompt').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey) {
      ev.preventDefault();
      $('chat-form').requestSubmit();
    }
  });
  $('stop').addEventListener('click', () => controller && controller.abort());
  $('clear').addEventListener('click', () => {
    if (controller) controller.abort();
    conversation.length = 0;
    $('messages').replaceChildren();
  });
  $('api-key').value = localStorage.getItem('tessera-api-key') || '';
  $('api-key').addEventListener('change', () => localStorage.setItem('tessera-api-key', $('api-key').value));

  // ---- cluster ----

  // One cell per layer; the node's layers are filled, so a pipeline's split shows at a glance.
  function layerMap(node, nLayer) {
    const map = el('div', 'layers');
    map.title = 'layers ' + node.layers.first + '–' + node.layers.last;
    if (node.embedding) map.appendChild(el('span', 'cell io', 'E'));
    for (let l = 0; l < nLayer; l++) {
      const held = l >= node.layers.first && l <= node.layers.last;
      map.appendChild(el('span', held ? 'cell held' : 'cell'));
    }
    if (node.head) map.appendChild(el('span', 'cell io', 'H'));
    return map;
  }

  function memoryBar(mem) {
    const wrap = el('div', 'membar');
    const cap = mem.capacity || mem.used || 1;
    const w = el('span', 'weights');
    w.style.width = (100 * mem.weights / cap) + '%';
    const kv = el('span', 'kv');
    kv.style.width = (100 * mem.kv_cache / cap) + '%';
    wrap.append(w, kv);
    wrap.title = 'weights ' + bytes(mem.weights) + ', KV cache ' + bytes(mem.kv_cache) +
        (mem.capacity ? ' of ' + bytes(mem.capacity) : '');
    return wrap;
  }

  function nodeCard(node, info) {
    const card = el('div', 'node');
    card.dataset.name = node.name;
    card.dataset.status = node.status;
    const head = el('div', 'node-head');
    head.append(el('span', 'dot'), el('strong', 'name', node.name));
    if (node.address) head.appendChild(el('span', 'addr', node.address));
    // After a failover another worker (a spare, or this process) runs the stage.
    if (node.running_on && node.running_on !== node.address && node.running_on !== node.name) {
      head.appendChild(el('span', 'addr', 'now on ' + node.running_on));
    }
    card.appendChild(head);
    card.appendChild(el('div', 'layer-text', 'layers ' + node.layers.first + '–' + node.layers.last + ' of ' +
        info.n_layer + (node.embedding ? ' · embedding' : '') + (node.head ? ' · head' : '')));
    card.appendChild(layerMap(node, info.n_layer));
    if (node.experts) {
      const held = node.experts.held === 'all' ? 'all ' + node.experts.count : node.experts.held.join(', ');
      card.appendChild(el('div', 'experts', 'experts: ' + held + ' (' + node.experts.used + ' used per token)'));
    }
    card.appendChild(memoryBar(node.memory));
    card.appendChild(el('div', 'mem-text', bytes(node.memory.used) + ' used' +
        (node.memory.capacity ? ' of ' + bytes(node.memory.capacity) : '') + ' (weights ' +
        bytes(node.memory.weights) + ', KV ' + bytes(node.memory.kv_cache) + ')'));
    const link = node.address ? 'link ' + node.link_rtt_ms.toFixed(2) + ' ms RTT · ' + bytes(node.bytes_sent) +
        ' out, ' + bytes(node.bytes_received) + ' in' : 'in process (no link)';
    card.appendChild(el('div', 'latency', 'step ' + node.step_ms.toFixed(2) + ' ms · ' + link));
    return card;
  }

  function drawSpark() {
    const max = Math.max(1, ...history);
    const pts = history.map((v, i) => (i * 300 / Math.max(1, history.length - 1)).toFixed(1) + ',' +
        (46 - 44 * v / max).toFixed(1));
    $('spark-line').setAttribute('points', pts.join(' '));
  }

  function render(h) {
    $('model').textContent = h.model + ' · ' + h.model_info.arch + ', ' + h.model_info.n_layer + ' layers' +
        (h.model_info.n_expert ? ', ' + h.model_info.n_expert + ' experts' : '');
    $('status').textContent = h.status;
    $('status').dataset.status = h.status;
    let decode = 0, prompt = 0, active = 0, queued = 0;
    const reps = $('replicas');
    reps.replaceChildren();
    for (const r of h.replicas) {
      decode += r.decode_tokens_per_second;
      prompt += r.prompt_tokens_per_second;
      active += r.active;
      queued += r.queued;
      const card = el('div', 'replica');
      card.dataset.status = r.status;
      card.appendChild(el('div', 'replica-head', 'replica ' + r.id + ' · ' + r.status + ' · ' + r.active + '/' +
          r.parallel + ' decoding, ' + r.queued + ' queued · ' + r.decode_tokens_per_second.toFixed(1) + ' tok/s' +
          (r.failovers ? ' · ' + r.failovers + ' failover(s), ' + r.replayed_tokens + ' tokens replayed' : '') +
          (r.moved_out ? ' · ' + r.moved_out + ' request(s) moved to another replica' : '')));
      const nodes = el('div', 'nodes');
      for (const n of r.nodes) nodes.appendChild(nodeCard(n, h.model_info));
      card.appendChild(nodes);
      reps.appendChild(card);
    }
    history.push(decode);
    if (history.length > 60) history.shift();
    drawSpark();
    $('throughput').textContent = decode.toFixed(1) + ' tok/s decode · ' + prompt.toFixed(1) + ' tok/s prompt';
    $('summary').textContent = h.replicas.length + ' replica(s) · ' + active + ' decoding · ' + queued +
        ' queued · context ' + h.model_info.n_ctx + ' · chat template ' + h.model_info.chat_template;
  }

  async function poll() {
    try {
      const res = await fetch('/health', {cache: 'no-store'});
      render(await res.json());
    } catch (e) {
      $('status').textContent = 'unreachable';
      $('status').dataset.status = 'failed';
    }
    setTimeout(poll, 1000);
  }
  poll();
})();
