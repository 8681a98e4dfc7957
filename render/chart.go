package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/render/child"
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
	if out, ok := r.charts.Get(key); ok {
		return out.copy(), nil
	}
	out, err := r.renderChart(ctx, c)
	if err == nil && (out.Problem == nil || out.Problem.Reason != ReasonLimit) {
		// What the machine's limits decided is not the chart's answer.
		r.charts.Add(key, out.copy(), chartSize(out))
	}
	return out, err
}

// renderChart renders c in a child.
func (r *Renderer) renderChart(ctx context.Context, c Chart) (*RenderedChart, error) {
	rep, p, err := r.ask(ctx, helmRequest{Chart: &c}, "rendering")
	switch {
	case err != nil:
		return nil, err
	case p == nil && rep.Chart == nil:
		p = &Problem{Reason: ReasonInvalid, Message: "the render child gave no chart"}
	case p == nil:
		p = rep.Chart.Problem
	}
	if p != nil {
		p.Overlay = c.Name
		return &RenderedChart{Problem: p}, nil
	}
	out := &RenderedChart{Hooks: rep.Chart.Hooks}
	if out.Objects, err = ParseObjects([]byte(rep.Chart.Manifest)); err == nil {
		out.CRDs, err = ParseObjects([]byte(rep.Chart.CRDs))
	}
	if err != nil {
		out.Objects, out.CRDs = nil, nil
		out.Problem = &Problem{Overlay: c.Name, Reason: ReasonInvalid, Message: "the chart renders YAML that does not parse: " + err.Error()}
	}
	return out, nil
}

// ask runs one request (a chart, an index) in a child of its own, under
// the render limits, and returns its reply; or the problem that stopped
// it (what took longer than the limit, as doing says, or exhausted the
// child); the error is for a failure to ask at all.
func (r *Renderer) ask(ctx context.Context, req helmRequest, doing string) (helmReply, *Problem, error) {
	lim := r.opts.Limits
	if err := r.slots.Acquire(ctx); err != nil {
		return helmReply{}, nil, err
	}
	defer r.slots.Release()
	b, err := encode(req)
	if err != nil {
		return helmReply{}, nil, err
	}
	ch, err := r.startChild(1, &child.Request{MaxOutput: lim.MaxOutput, Helm: b})
	if err != nil {
		return helmReply{}, nil, err
	}
	replied := make(chan helmReply, 1)
	go func() {
		var rep child.Reply
		var h helmReply
		if err := gob.NewDecoder(ch.stdout).Decode(&rep); err == nil && gob.NewDecoder(bytes.NewReader(rep.Helm)).Decode(&h) == nil {
			replied <- h
		}
		close(replied)
	}()
	timer := time.NewTimer(lim.Timeout)
	defer timer.Stop()
	var rep helmReply
	var ok bool
	stop := func() { ch.kill(); _ = ch.cmd.Wait() } // killed: its status says so
	select {
	case rep, ok = <-replied:
	case <-timer.C:
		stop()
		return helmReply{}, &Problem{Reason: ReasonLimit, Message: fmt.Sprintf("%s took longer than the limit of %s", doing, lim.Timeout)}, nil
	case <-ctx.Done():
		stop()
		return helmReply{}, nil, ctx.Err()
	}
	waitErr := ch.cmd.Wait()
	if !ok {
		return helmReply{}, exitProblem(waitErr, ch.stderr.String(), lim), nil
	}
	return rep, nil, nil
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
func (r *Renderer) CachedCharts() int64 { return r.charts.Hits() }

// chartKey identifies a chart's render: its files, values and release
// settings, and what renders them.
func chartKey(c Chart) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s%q\n", cacheSalt, c.Name)
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

// chartSize is what a rendered chart counts for in the cache: its
// objects as JSON.
func chartSize(out *RenderedChart) int64 {
	var size int64 = 1 << 10
	for _, o := range append(slices.Clone(out.Objects), out.CRDs...) {
		b, _ := json.Marshal(o.Object) // it was parsed from YAML: it marshals
		size += int64(len(b))
	}
	return size
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

// indexReply is a render child's answer to an index.
type indexReply struct {
	Entries []helm.IndexEntry
	Err     string
}

// ChartIndex is the versions a chart repository's index gives chart,
// parsed in a render child, with its memory, CPU and time limits: an
// index is the repository's to write, and parsing YAML takes tens of times
// its size in memory, which the parent does not spend.
func (r *Renderer) ChartIndex(ctx context.Context, index []byte, chart string) ([]helm.IndexEntry, error) {
	if max := r.opts.Limits.MaxInput; int64(len(index)) > max {
		return nil, fmt.Errorf("index.yaml is %d bytes, over the limit of %d a render reads", len(index), max)
	}
	rep, p, err := r.ask(ctx, helmRequest{Index: index, IndexChart: chart}, "reading index.yaml")
	switch {
	case err != nil:
		return nil, err
	case p != nil:
		return nil, errors.New("index.yaml: " + p.Message)
	case rep.Index == nil:
		return nil, errors.New("index.yaml: the render child gave no answer")
	case rep.Index.Err != "":
		return nil, errors.New(rep.Index.Err)
	}
	return rep.Index.Entries, nil
}

// chartIndex is the child's side of ChartIndex.
func chartIndex(req *helmRequest) indexReply {
	entries, err := helm.IndexEntries(req.Index, req.IndexChart)
	if err != nil {
		return indexReply{Err: err.Error()}
	}
	return indexReply{Entries: entries}
}
