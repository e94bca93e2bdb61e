// The live feed: `GET /ws`, resumed from the last cursor after a drop so no event is missed
// and none is shown twice. Listeners get every protocol event; the state (connecting, live,
// offline) is shown in the header.

const MAX_BACKOFF_MS = 30_000;

export class Live {
  constructor(onState) {
    this.cursor = null;
    this.listeners = new Set();
    this.onState = onState;
    this.socket = null;
    this.backoff = 500;
    this.stopped = false;
    this.snapshot = null;
  }

  /** Listens to every event (and to `snapshot`); returns the function that stops it. */
  on(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    if (this.socket) this.socket.close();
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const after = this.cursor ? `?after=${encodeURIComponent(this.cursor)}` : "";
    this.onState("connecting");
    let ws;
    try {
      ws = new WebSocket(`${scheme}://${location.host}/ws${after}`);
    } catch {
      this.retry();
      return;
    }
    this.socket = ws;
    ws.onopen = () => this.onState("live");
    ws.onmessage = (m) => {
      let e;
      try {
        e = JSON.parse(m.data);
      } catch {
        return;
      }
      if (e.type === "error") return; // the server closes after it; the backoff grows
      // Only a session that delivered something resets the backoff: one the server accepts and
      // closes at once is retried ever more slowly, not every half second.
      this.backoff = 500;
      if (e.cursor) this.cursor = e.cursor;
      if (e.type === "heartbeat") return;
      if (e.type === "snapshot") this.snapshot = e;
      if (e.type === "reset") this.cursor = null;
      for (const fn of this.listeners) {
        try {
          fn(e);
        } catch (err) {
          console.error(err);
        }
      }
    };
    ws.onclose = () => {
      this.socket = null;
      if (!this.stopped) this.retry();
    };
  }

  retry() {
    const wait = this.backoff;
    this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
    this.onState("offline", wait);
    setTimeout(() => {
      if (!this.stopped) this.connect();
    }, wait);
  }
}
