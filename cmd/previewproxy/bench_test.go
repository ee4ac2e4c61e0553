package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandman/internal/testkit"
)

// BENCHMARKS.md: "the preview proxy's added latency per request". One client asks the app
// directly and through the proxy in turn (the same keep-alive connections, requests one after
// another, the two kinds alternating so a busy moment of the machine falls on both), for a
// module of a dev server (20 KiB of JavaScript, forwarded untouched) and for a page (1 KiB of
// HTML, which takes the tag). The floor is the direct request; what the proxy adds is the
// difference of the quantiles. Each sample is checked: the module byte-identical, the page
// with its tag.
func BenchmarkProxyAdded(b *testing.B) {
	module := make([]byte, 20<<10)
	_, _ = rand.Read(module)
	page := "<!doctype html><html><head><title>bench</title></head><body>" + strings.Repeat("<p>text</p>", 80) + "</body></html>"
	app := upstream(b, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Length", strconv.Itoa(len(page)))
			_, _ = io.WriteString(w, page)
			return
		}
		w.Header().Set("Content-Type", "text/javascript")
		w.Header().Set("Content-Length", strconv.Itoa(len(module)))
		_, _ = w.Write(module)
	})
	p, proxy := startProxy(b, testConfig(b, app))
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, Proxy: nil, MaxIdleConnsPerHost: 4}}
	get := func(url string, hdr map[string]string) (time.Duration, []byte) {
		req, _ := http.NewRequest("GET", url, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
		}
		return took, body
	}
	for _, run := range []struct {
		name, path string
		hdr        map[string]string
		want       []byte // through the proxy
	}{
		{"module", "/src/main.js", map[string]string{"Accept": "*/*"}, module},
		{"page", "/", navigation, []byte(strings.Replace(page, "<head>", "<head>"+string(p.tag), 1))},
	} {
		b.Run(run.name, func(b *testing.B) {
			var direct, proxied []time.Duration
			for range b.N {
				for i := range testkit.BenchSize(5000, 20) {
					d, _ := get(app.URL+run.path, run.hdr)
					t, body := get(proxy.URL+run.path, run.hdr)
					if i%2 == 1 { // the other order
						t, body = get(proxy.URL+run.path, run.hdr)
						d, _ = get(app.URL+run.path, run.hdr)
					}
					if !bytes.Equal(body, run.want) {
						b.Fatalf("through the proxy, %s came as %d bytes, not the %d expected", run.path, len(body), len(run.want))
					}
					direct, proxied = append(direct, d), append(proxied, t)
				}
			}
			for _, q := range []struct {
				name string
				p    float64
			}{{"p50", 0.5}, {"p99", 0.99}} {
				dq, pq := quantileMs(direct, q.p), quantileMs(proxied, q.p)
				b.ReportMetric(dq, "direct-"+q.name+"-ms")
				b.ReportMetric(pq, "proxied-"+q.name+"-ms")
				b.ReportMetric(pq-dq, "added-"+q.name+"-ms")
			}
			b.ReportMetric(float64(len(direct)), "samples")
		})
	}
}

// quantileMs is the p quantile of samples in milliseconds (samples end sorted).
func quantileMs(samples []time.Duration, p float64) float64 {
	slices.Sort(samples)
	return float64(samples[min(len(samples)-1, int(p*float64(len(samples))))].Microseconds()) / 1000
}
