// A tiny app whose state lives only in memory: a memory snapshot keeps the count, a cold boot
// starts again at zero.
const http = require("http");

const port = Number(process.env.PORT || 3000);
let visits = 0;

const server = http.createServer((req, res) => {
  if (req.url === "/favicon.ico") {
    res.writeHead(204);
    return res.end();
  }
  visits += 1;
  res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
  res.end(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Counter</title>
<style>body{font-family:system-ui,sans-serif;display:grid;place-items:center;min-height:90vh;margin:0}
h1{font-size:3rem;margin:0}p{color:#555}</style></head>
<body><main><h1 id="visits">Visits: ${visits}</h1><p>Counted in memory since the server started.</p></main></body>
</html>
`);
});

server.listen(port, "0.0.0.0", () => {
  console.log(`counter listening on ${port}`);
});
