"""A screenshot of a running Model Explorer server in headless Chromium,
driven over the DevTools protocol (docs/model-explorer.md's figure).

    python scripts/model_explorer_screenshot.py URL OUT.png SECONDS [ACTION...]

URL: the one `model-explorer ... --no_open_in_browser --host 127.0.0.1` prints.
SECONDS: how long to let the page load and lay the graph out. Then each ACTION:
`zoom:X:Y:DY` (ctrl+wheel at X, Y), `drag:X0:Y0:X1:Y1`, `click:X:Y`, `js:EXPR`.
Writes OUT.png.0.png before the actions and OUT.png after. Every host but
127.0.0.1 is unresolvable for the browser (the web app asks for web fonts).
Needs Debian's `chromium` and the Python package `websocket-client`
(not one of runlens' dependencies).
"""
import json, sys, time, base64, subprocess, urllib.request
import websocket
url, out, wait = sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 20
flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--window-size=1600,1000",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=9333", "--remote-allow-origins=http://127.0.0.1:9333", "about:blank"]
p = subprocess.Popen(["chromium"] + flags, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(50):
        try:
            targets = json.load(urllib.request.urlopen("http://127.0.0.1:9333/json")); break
        except Exception: time.sleep(0.3)
    page = next(t for t in targets if t["type"] == "page")
    ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=120)
    n = [0]
    def call(method, **params):
        n[0] += 1; ws.send(json.dumps({"id": n[0], "method": method, "params": params}))
        while True:
            m = json.loads(ws.recv())
            if m.get("id") == n[0]: return m.get("result", m)
            if m.get("method") in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown"):
                print("console:", json.dumps(m["params"])[:300])
    call("Runtime.enable"); call("Log.enable")
    call("Emulation.setDeviceMetricsOverride", width=1600, height=1000, deviceScaleFactor=1, mobile=False)
    call("Page.navigate", url=url)
    t0 = time.time()
    while time.time() - t0 < wait:
        time.sleep(2)
        txt = call("Runtime.evaluate", expression="document.body.innerText.slice(0,200)")["result"].get("value")
        pass  # let the web app lay the graph out
    shot = call("Page.captureScreenshot", format="png")
    open(out + ".0.png", "wb").write(base64.b64decode(shot["data"]))
    for act in sys.argv[4:]:
        kind, *a = act.split(":")
        if kind == "zoom":  # zoom:x:y:dy
            x, y, dy = map(float, a)
            call("Input.dispatchMouseEvent", type="mouseWheel", x=x, y=y, deltaX=0, deltaY=dy, modifiers=2)
        elif kind == "drag":  # drag:x0:y0:x1:y1
            x0, y0, x1, y1 = map(float, a)
            call("Input.dispatchMouseEvent", type="mousePressed", x=x0, y=y0, button="left", clickCount=1)
            for k in range(1, 11):
                call("Input.dispatchMouseEvent", type="mouseMoved", x=x0+(x1-x0)*k/10, y=y0+(y1-y0)*k/10, button="left")
            call("Input.dispatchMouseEvent", type="mouseReleased", x=x1, y=y1, button="left", clickCount=1)
        elif kind == "click":
            x, y = map(float, a)
            for t in ("mousePressed", "mouseReleased"):
                call("Input.dispatchMouseEvent", type=t, x=x, y=y, button="left", clickCount=1)
            time.sleep(4)
        elif kind == "js":
            print("eval", call("Runtime.evaluate", expression=":".join(a), awaitPromise=True)["result"])
        time.sleep(1.5)
    shot = call("Page.captureScreenshot", format="png")
    open(out, "wb").write(base64.b64decode(shot["data"]))
    print("wrote", out)
finally:
    p.terminate(); p.wait()
