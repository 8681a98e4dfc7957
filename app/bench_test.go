package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/app/driftloop"
)

// BenchmarkWebhookIntake measures the work done before GitHub gets its 202:
// a signed pull_request delivery through the server's own handler (metrics,
// body limit, signature, delivery ID, parse), the App's router and the
// queue, at the production queue size (256) and worker count (4). The
// deliveries name 100 pull requests with a new head each, as a busy
// repository sends them; the queued jobs run meanwhile against the GitHub
// fake (which knows none of these pull requests, so each ends quickly).
func BenchmarkWebhookIntake(b *testing.B) {
	w := newWorld(b, func(c *config.Config) {
		c.Server.QueueSize, c.Server.Workers = 256, 4 // the production defaults
	})
	h := w.srv.Handler()
	// 1,000 deliveries an iteration, so a short -benchtime still measures.
	i := 0
	start := time.Now()
	for b.Loop() {
		for range 1000 {
			i++
			body, err := json.Marshal(prPayload("synchronize", 1000+i%100, fmt.Sprintf("%040x", i)))
			if err != nil {
				b.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
			req.Header.Set("X-GitHub-Event", "pull_request")
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("d-%d", i))
			req.Header.Set("X-Hub-Signature-256", sign(w.secret, body))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusAccepted {
				b.Fatalf("delivery %d: %d %s", i, rec.Code, rec.Body)
			}
		}
	}
	b.ReportMetric(float64(i)/time.Since(start).Seconds(), "deliveries/s")
}

// manyTargets is a repository of overlays, perBase of them on each base, each
// overlay a target on the local apiserver.
func manyTargets(tb testing.TB, overlays, perBase int) (*world, plumbing.Hash) {
	files := map[string]any{}
	for i := range overlays / perBase {
		files[fmt.Sprintf("bases/b%02d/kustomization.yaml", i)] = "resources:\n- app.yaml\n"
		files[fmt.Sprintf("bases/b%02d/app.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  base: b%02d\n  version: \"1\"\n", i)
	}
	var targets strings.Builder
	for i := range overlays {
		files[fmt.Sprintf("overlays/o%03d/kustomization.yaml", i)] = fmt.Sprintf("namespace: NS\nnamePrefix: o%03d-\nresources:\n- ../../bases/b%02d\n", i, i/perBase)
		fmt.Fprintf(&targets, "- name: o%03d\n  repo: %s\n  path: overlays/o%03d\n  cluster: test\n", i, fullName, i)
	}
	w := newWorld(tb, func(c *config.Config) {
		extra, err := config.ParseConfig([]byte("targets:\n"+targets.String()+"clusters:\n  test:\n    kubeconfig: "+c.Clusters["test"].Kubeconfig+"\n"), func(string) string { return "" })
		if err != nil {
			tb.Fatal(err)
		}
		c.Targets = extra.Targets
	})
	return w, w.commit(plumbing.ZeroHash, files)
}

// BenchmarkDeliveryToComment measures, with warm caches, the time from a
// synchronize delivery to the updated comment, for a pull request that changes
// one base shared by 10 overlays of a 200-overlay repository, each overlay a
// target on the local apiserver (11 check runs each time: the aggregate and
// the 10 affected targets), against a GitHub fake that answers in 50 ms and
// refuses more than 80 content-creating requests a minute, with the product's
// pacer (80 a minute, 20 at once).
func BenchmarkDeliveryToComment(b *testing.B) {
	w, base := manyTargets(b, 200, 10)
	// GitHub as it answers: a round trip per request, and its secondary
	// limit on content creation (which the product's pacer must stay under).
	w.gh.SetLatency(githubLatency)
	w.gh.LimitContent(80)
	version := 1
	run := func() time.Duration {
		version++
		head := w.commit(base, map[string]any{"bases/b03/app.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  base: b03\n  version: \"%d\"\n", version)})
		w.openPR(1, base, head, nil)
		start := time.Now()
		if code := w.deliver("pull_request", fmt.Sprintf("d-%d", version), prPayload("synchronize", 1, head.String())); code != http.StatusAccepted {
			b.Fatalf("delivery: %d", code)
		}
		marker := "head " + head.String()[:12]
		for {
			if c := w.gh.Comments(fullName, 1); len(c) == 1 && strings.Contains(c[0].Body, marker) {
				d := time.Since(start)
				w.waitIdle()
				return d
			}
			if time.Since(start) > 2*time.Minute {
				b.Fatalf("no comment for %s", head)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	run() // warm: clone, base renders, schemas
	var samples []time.Duration
	for b.Loop() {
		samples = append(samples, run())
	}
	b.Logf("delivery to comment, in order: %v", samples)
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	pct := func(p float64) float64 {
		return samples[min(len(samples)-1, int(p*float64(len(samples))))].Seconds()
	}
	b.ReportMetric(pct(0.50), "p50-s")
	b.ReportMetric(pct(0.99), "p99-s")
	b.ReportMetric(float64(len(samples)), "samples")
	limited := 0
	for _, c := range w.gh.Calls() {
		if c.Status == http.StatusForbidden {
			limited++
		}
	}
	if limited > 0 {
		b.Errorf("%d requests hit the secondary rate limit: the pacer let too many through", limited)
	}
}

// githubLatency is the round trip the GitHub fake adds to every request in
// the benchmarks: about what api.github.com answers in from a cloud region.
const githubLatency = 50 * time.Millisecond

// BenchmarkDriftToPullRequest measures the drift loop end to end with a quiet
// period of 0: from a person scaling a Deployment on the real apiserver to
// the drift pull request open on GitHub (the fake), with the branch pushed
// to the real git server. Each iteration scales to a new count; a person then
// closes the pull request, so the next count opens a new one. The loop runs
// with its production debounce.
func BenchmarkDriftToPullRequest(b *testing.B) {
	d := newDriftWorld(b, 0, nil)
	d.debounce = driftloop.New(d.srv.App.driftDeps(), discard).Debounce // as in production
	d.run()
	d.settle(1)
	replicas := int32(10)
	var total time.Duration
	var n int
	for b.Loop() {
		replicas++
		want := fmt.Sprintf("`%d`", replicas)
		start := time.Now()
		d.scale(replicas, "kubectl")
		var number int
		d.waitFor("the pull request", func() bool {
			for _, p := range d.openPulls() {
				if strings.Contains(p.Body, want) {
					number = p.Number
					return true
				}
			}
			return false
		})
		total += time.Since(start)
		n++
		b.StopTimer()
		d.gh.ClosePull(fullName, number, false)
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(n), "ms/change-to-PR")
}
