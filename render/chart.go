package render

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/render/helm"
)

// Chart is a Helm chart to render for one release, in a render child like
// an overlay: no network, no disk, the same memory, CPU and time limits.
type Chart struct {
	// Name says which chart this is in problems ("podinfo 6.5.4", a path).
	Name string
	// Files are the chart's files by path from its root (Chart.yaml,
	// values.yaml, templates/…, charts/…).
	Files map[string][]byte
	// Values are the release's values (YAML or JSON), over the chart's
	// defaults.
	Values  []byte
	Release helm.Options
}

// RenderedChart is a chart rendered for one release.
type RenderedChart struct {
	// Objects are what the release applies, in Helm's install order.
	Objects []*unstructured.Unstructured
	// CRDs are the chart's crds/, untemplated.
	CRDs  []*unstructured.Unstructured
	Hooks []helm.Hook
	// Problem says why the chart could not be rendered; nil when it was.
	Problem *Problem
}

// chartReply is a render child's answer to a chart.
type chartReply struct {
	Manifest, CRDs string
	Hooks          []helm.Hook
	Problem        *Problem
}

// RenderChart renders c. The error is only for a failure to render at all
// (the context ended, the child cannot start); what is wrong with the chart
// is the result's Problem.
func (r *Renderer) RenderChart(ctx context.Context, c Chart) (*RenderedChart, error) {
	lim := r.opts.Limits
	if p := checkChartSize(c, lim); p != nil {
		return &RenderedChart{Problem: p}, nil
	}
	key := chartKey(c)
	if out := r.charts.get(key); out != nil {
		return out, nil
	}
	out, err := r.renderChart(ctx, c)
	if err == nil && (out.Problem == nil || out.Problem.Reason != ReasonLimit) {
		// What the machine's limits decided is not the chart's answer.
		r.charts.put(key, out)
	}
	return out, err
}

// renderChart renders c in a child.
func (r *Renderer) renderChart(ctx context.Context, c Chart) (*RenderedChart, error) {
	lim := r.opts.Limits
	if err := r.slots.Acquire(ctx); err != nil {
		return nil, err
	}
	defer r.slots.Release()
	ch, err := r.startChild(1, &childRequest{MaxOutput: lim.MaxOutput, Chart: &c})
	if err != nil {
		return nil, err
	}
	replied := make(chan chartReply, 1)
	go func() {
		var rep childReply
		if err := gob.NewDecoder(ch.stdout).Decode(&rep); err == nil && rep.Chart != nil {
			replied <- *rep.Chart
		}
		close(replied)
	}()
	timer := time.NewTimer(lim.Timeout)
	defer timer.Stop()
	var rep chartReply
	var ok bool
	select {
	case rep, ok = <-replied:
	case <-timer.C:
		ch.kill()
		_ = ch.cmd.Wait()
		return &RenderedChart{Problem: &Problem{Overlay: c.Name, Reason: ReasonLimit,
			Message: fmt.Sprintf("rendering took longer than the limit of %s", lim.Timeout)}}, nil
	case <-ctx.Done():
		ch.kill()
		_ = ch.cmd.Wait()
		return nil, ctx.Err()
	}
	waitErr := ch.cmd.Wait()
	if !ok {
		p := exitProblem(waitErr, ch.stderr.String(), lim)
		p.Overlay = c.Name
		return &RenderedChart{Problem: p}, nil
	}
	out := &RenderedChart{Hooks: rep.Hooks, Problem: rep.Problem}
	if out.Problem != nil {
		out.Problem.Overlay = c.Name
		return out, nil
	}
	if out.Objects, err = ParseObjects([]byte(rep.Manifest)); err == nil {
		out.CRDs, err = ParseObjects([]byte(rep.CRDs))
	}
	if err != nil {
		out.Objects, out.CRDs = nil, nil
		out.Problem = &Problem{Overlay: c.Name, Reason: ReasonInvalid, Message: "the chart renders YAML that does not parse: " + err.Error()}
	}
	return out, nil
}

// checkChartSize refuses a chart larger than an overlay may read.
func checkChartSize(c Chart, lim Limits) *Problem {
	total := int64(len(c.Values))
	for _, n := range slices.Sorted(maps.Keys(c.Files)) {
		size := int64(len(c.Files[n]))
		if size > lim.MaxFile {
			return &Problem{Overlay: c.Name, File: n, Reason: ReasonLimit,
				Message: fmt.Sprintf("%d bytes, over the limit of %d for one file", size, lim.MaxFile)}
		}
		total += size
	}
	if total > lim.MaxInput {
		return &Problem{Overlay: c.Name, Reason: ReasonLimit,
			Message: fmt.Sprintf("the chart and its values are %d bytes, over the limit of %d", total, lim.MaxInput)}
	}
	return nil
}

// renderChart is the child's side of RenderChart.
func renderChart(c *Chart, maxOutput int64) chartReply {
	out, err := helm.Render(c.Files, c.Values, c.Release)
	if err != nil {
		return chartReply{Problem: &Problem{Reason: ReasonHelm, Message: err.Error()}}
	}
	if size := int64(len(out.Manifest) + len(out.CRDs)); size > maxOutput {
		return chartReply{Problem: &Problem{Reason: ReasonLimit,
			Message: fmt.Sprintf("the chart renders %d bytes, over the limit of %d", size, maxOutput)}}
	}
	return chartReply{Manifest: out.Manifest, CRDs: out.CRDs, Hooks: out.Hooks}
}

// CachedCharts is how many chart renders the cache answered.
func (r *Renderer) CachedCharts() int64 {
	r.charts.mu.Lock()
	defer r.charts.mu.Unlock()
	return r.charts.hits
}

// chartKey identifies a chart's render: its files, values and release
// settings, and what renders them.
func chartKey(c Chart) string {
	h := sha256.New()
	fmt.Fprintf(h, "%shelm/v4.3.2\n%q\n", cacheSalt, c.Name)
	for _, n := range slices.Sorted(maps.Keys(c.Files)) {
		fmt.Fprintf(h, "%q %d\n", n, len(c.Files[n]))
		h.Write(c.Files[n])
	}
	fmt.Fprintf(h, "%d\n", len(c.Values))
	h.Write(c.Values)
	o, _ := json.Marshal(c.Release)
	h.Write(o)
	return hex.EncodeToString(h.Sum(nil))
}

// chartCache keeps rendered charts, most recently used first, up to a
// number of manifest bytes. Each get is a copy: callers change what they
// are given. A nil *chartCache keeps nothing.
type chartCache struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   *list.List // of *chartEntry
	entries map[string]*list.Element
	hits    int64
}

type chartEntry struct {
	key  string
	out  *RenderedChart
	size int64
}

func newChartCache(max int64) *chartCache {
	return &chartCache{max: max, order: list.New(), entries: map[string]*list.Element{}}
}

func (c *chartCache) get(key string) *RenderedChart {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil
	}
	c.hits++
	c.order.MoveToFront(e)
	return e.Value.(*chartEntry).out.copy()
}

func (c *chartCache) put(key string, out *RenderedChart) {
	if c == nil {
		return
	}
	var size int64 = 1 << 10
	for _, o := range append(slices.Clone(out.Objects), out.CRDs...) {
		b, _ := json.Marshal(o.Object)
		size += int64(len(b))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; ok || size > c.max {
		return
	}
	c.entries[key] = c.order.PushFront(&chartEntry{key: key, out: out.copy(), size: size})
	for c.size += size; c.size > c.max; {
		last := c.order.Back()
		old := last.Value.(*chartEntry)
		c.order.Remove(last)
		delete(c.entries, old.key)
		c.size -= old.size
	}
}

// copy is a deep copy of r.
func (r *RenderedChart) copy() *RenderedChart {
	out := &RenderedChart{Hooks: slices.Clone(r.Hooks), Problem: r.Problem}
	for _, o := range r.Objects {
		out.Objects = append(out.Objects, o.DeepCopy())
	}
	for _, o := range r.CRDs {
		out.CRDs = append(out.CRDs, o.DeepCopy())
	}
	return out
}
