// Caches the app shell only, so the app opens offline and says so. API answers and the event
// stream are never cached: they always go to the server.
const CACHE = "steward-shell-v3";
const SHELL = [
  "/",
  "/app/app.js",
  "/app/api.js",
  "/app/dom.js",
  "/app/live.js",
  "/app/paged.js",
  "/app/style.css",
  "/app/icon.svg",
  "/manifest.webmanifest",
  "/app/pages/chat.js",
  "/app/pages/approvals.js",
  "/app/pages/mail.js",
  "/app/pages/memory.js",
  "/app/pages/watches.js",
  "/app/pages/journal.js",
  "/app/pages/usage.js",
  "/app/pages/audit.js",
  "/app/pages/system.js",
  "/app/pages/devices.js",
];

self.addEventListener("install", (e) => {
  e.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (e) => {
  e.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (e) => {
  const url = new URL(e.request.url);
  if (e.request.method !== "GET" || url.origin !== location.origin) return;
  const shell = url.pathname === "/" || SHELL.includes(url.pathname);
  if (!shell) return; // the API and /ws: straight to the network
  // Network first (a new version is picked up at once), the cached shell when offline.
  e.respondWith(
    fetch(e.request)
      .then((res) => {
        if (res.ok) {
          const copy = res.clone();
          // One entry per file: the shell with any query string is stored as the shell.
          caches.open(CACHE).then((c) => c.put(url.pathname === "/" ? "/" : e.request, copy));
        }
        return res;
      })
      .catch(() => caches.match(url.pathname === "/" ? "/" : e.request)),
  );
});
