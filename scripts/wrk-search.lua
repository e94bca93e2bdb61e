-- wrk script for `scripts/bench http`: GET /search with a rotating mix of the retrieval
-- bench's query shapes, authenticated with $STEWARD_AUTH_TOKEN. Fails loudly on non-2xx.
local token = os.getenv("STEWARD_AUTH_TOKEN")
local queries = {
  "/search?text=invoice&limit=8",
  "/search?text=meeting%20agenda&limit=8",
  "/search?text=condominio&limit=8",
  "/search?from=rossi&limit=8",
  "/search?role=inbox&unread=true&limit=8",
  "/search?text=payment&after=2025-01-01&limit=8",
  "/search?body_contains=technician&limit=8",
  "/search?text=report&has_attachments=true&limit=8",
}
-- STEWARD_WRK_MIX=text: free-text queries only (no substring or filter work).
if os.getenv("STEWARD_WRK_MIX") == "text" then
  queries = {
    "/search?text=invoice&limit=8",
    "/search?text=meeting%20agenda&limit=8",
    "/search?text=condominio&limit=8",
    "/search?text=payment&limit=8",
    "/search?text=report&limit=8",
    "/search?text=technician%20tuesday&limit=8",
  }
end
local n = 0
request = function()
  n = n + 1
  local path = queries[(n % #queries) + 1]
  return wrk.format("GET", path, { ["Authorization"] = "Bearer " .. token, ["Host"] = "127.0.0.1" })
end
