// Package render builds kustomize overlays from a git commit or a working tree,
// safely: the files come from an in-memory copy of the repository (no symlinks,
// nothing outside it), and kustomize runs in a child process (driftback itself,
// re-executed) with no network, no programs to run and CPU, memory, time and size
// limits. Results carry per-overlay problems as data for a pull request to show.
package render

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/driftback/driftback/internal/lru"
	"github.com/driftback/driftback/render/child"
	"github.com/driftback/driftback/render/slots"
)

// Reason classifies a Problem so callers can branch on it and show it.
type Reason = child.Reason

// Reasons a render can fail.
const (
	ReasonOutsideRepo = child.ReasonOutsideRepo // a path leaves the repository or is absolute
	ReasonSymlink     = child.ReasonSymlink     // a path goes through a symlink or submodule
	ReasonRemote      = child.ReasonRemote      // an http(s), git or file:// resource or base
	ReasonHelm        = child.ReasonHelm        // helmCharts and friends
	ReasonPlugin      = child.ReasonPlugin      // exec, KRM-function or Go plugins
	ReasonNotFound    = child.ReasonNotFound    // a referenced file or directory is missing
	ReasonInvalid     = child.ReasonInvalid     // malformed YAML or kustomization
	ReasonLimit       = child.ReasonLimit       // input size, memory, CPU or time limit exceeded
	ReasonPanic       = child.ReasonPanic       // kustomize panicked or the render child crashed
	ReasonKustomize   = child.ReasonKustomize   // any other error kustomize returned
)

// Problem is one thing wrong with an overlay, meant for the person who can
// fix it: it names the file (and line, when known) and says why.
type Problem = child.Problem

// Origin says where a rendered object came from.
type Origin = child.Origin

// Overlay is the render of one overlay.
type Overlay struct {
	// Path is the overlay directory, repository-relative.
	Path string
	// YAML is the rendered stream, byte for byte what `kubectl kustomize` prints.
	YAML []byte
	// Origins holds one entry per object of YAML, in the same order, when the
	// Renderer was asked for them (Options.Origins).
	Origins []Origin
	// Problems is empty when the overlay rendered.
	Problems []*Problem
	// Hooks names the Argo CD hooks left out ("Kind name", or "Kind
	// generateName*"), with BuildOptions.WithoutArgoCDHooks.
	Hooks []string
	// Cached is true when the render came from the cache.
	Cached bool
}

// Err returns the overlay's first problem, or nil.
func (o *Overlay) Err() error {
	if len(o.Problems) == 0 {
		return nil
	}
	return o.Problems[0]
}

// Objects parses the rendered stream.
func (o *Overlay) Objects() ([]*unstructured.Unstructured, error) {
	return ParseObjects(o.YAML)
}

// ParseObjects decodes a YAML (or JSON) stream of Kubernetes objects; Lists are
// kept as they are.
func ParseObjects(stream []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, fmt.Errorf("object %d: %w", len(out)+1, err)
		}
		if m == nil {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// Result is the render of several overlays from one tree.
type Result struct {
	// Rev is the commit or directory the overlays were rendered from.
	Rev string
	// Overlays are in the order they were asked for.
	Overlays []*Overlay
}

// Problems returns every problem of every overlay.
func (r *Result) Problems() []*Problem {
	var out []*Problem
	for _, o := range r.Overlays {
		out = append(out, o.Problems...)
	}
	return out
}

// Limits bound what one render may consume. A zero field takes its value from
// DefaultLimits.
type Limits struct {
	// Memory is the private writable memory a render child may use (its heap,
	// stacks and data: RLIMIT_DATA), in bytes.
	Memory int64
	// CPU is the processor time one overlay may use.
	CPU time.Duration
	// Timeout is the wall time one overlay may take.
	Timeout time.Duration
	// MaxInput is the total size of the files one overlay may read, in bytes.
	MaxInput int64
	// MaxFile is the size of the largest single file an overlay may read.
	MaxFile int64
	// MaxOutput is the size of one overlay's rendered stream.
	MaxOutput int64
}

// DefaultLimits are generous for real GitOps repositories and small enough that a
// hostile one cannot hurt the host.
func DefaultLimits() Limits {
	return Limits{
		Memory:    2 << 30,
		CPU:       30 * time.Second,
		Timeout:   60 * time.Second,
		MaxInput:  64 << 20,
		MaxFile:   16 << 20,
		MaxOutput: 64 << 20,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Memory == 0 {
		l.Memory = d.Memory
	}
	if l.CPU == 0 {
		l.CPU = d.CPU
	}
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	if l.MaxInput == 0 {
		l.MaxInput = d.MaxInput
	}
	if l.MaxFile == 0 {
		l.MaxFile = d.MaxFile
	}
	if l.MaxOutput == 0 {
		l.MaxOutput = d.MaxOutput
	}
	return l
}

// Options configure a Renderer.
type Options struct {
	// Limits bound each render; zero fields take DefaultLimits.
	Limits Limits
	// Parallelism is how many render children run at once; 0 means one per CPU.
	Parallelism int
	// Cache keeps renders by the content of their inputs; nil renders every time.
	Cache *Cache
	// Origins records where every rendered object came from (Overlay.Origins).
	// It costs kustomize about 40% more time, so only callers that need it (the
	// drift write-back) ask; false leaves Overlay.Origins empty.
	Origins bool
	// Executable is the program re-executed as the render child; empty means the
	// running binary, which must call ServeChild early in main (or TestMain).
	Executable string
	// KustomizeExecutable is the render child for overlays that inflate no
	// chart: a program that links kustomize alone (driftback-render, which
	// calls child.Serve(nil)) and so starts in a fraction of Executable's
	// time. Empty means driftback-render beside the running binary when it
	// is of the same build (childbin.Find), else Executable.
	KustomizeExecutable string
}

// DefaultOptions renders on every CPU with default limits and a 256 MiB cache.
func DefaultOptions() Options {
	return Options{Limits: DefaultLimits(), Cache: NewCache(256 << 20)}
}

// Renderer renders overlays. It is safe for concurrent use.
type Renderer struct {
	opts  Options
	slots *slots.Slots
	// charts are rendered charts, by what they were rendered from; each
	// is copied in and out, as its callers change what they are given.
	charts *lru.Cache[*RenderedChart]
}

// New returns a Renderer. Where the container has a memory limit, the
// children of every Renderer in the process together stay within half of it
// (see slots.ContainerMemory): fewer run at once, or each gets less than
// Limits.Memory.
func New(opts Options) *Renderer {
	opts.Limits = opts.Limits.withDefaults()
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	slots := slots.Process(DefaultLimits().Memory)
	opts.Parallelism = min(opts.Parallelism, slots.Size())
	if m := slots.Memory(); m > 0 {
		opts.Limits.Memory = min(opts.Limits.Memory, m)
	}
	return &Renderer{opts: opts, slots: slots, charts: lru.New[*RenderedChart](chartCacheBytes)}
}

// chartCacheBytes bounds the rendered charts a Renderer keeps.
const chartCacheBytes = 64 << 20

// Render renders the given overlays of t. Every overlay gets an entry in the
// result, with its problems if it could not be rendered; the error is only for a
// failure to render at all (the context ended, the child cannot start).
func (r *Renderer) Render(ctx context.Context, t *Tree, overlays []string) (*Result, error) {
	return r.RenderWith(ctx, t, overlays, BuildOptions{})
}

// BuildOptions change how kustomize builds, for reconcilers that build
// differently from `kustomize build`.
type BuildOptions = child.BuildOptions

// RenderWith is Render with build options.
func (r *Renderer) RenderWith(ctx context.Context, t *Tree, overlays []string, b BuildOptions) (*Result, error) {
	res := &Result{Rev: t.Rev, Overlays: make([]*Overlay, len(overlays))}
	var jobs []*job
	for i, o := range overlays {
		o = CleanPath(o)
		out := &Overlay{Path: o}
		res.Overlays[i] = out
		c := t.closure(o)
		if ps := c.problemsWith(b); len(ps) > 0 {
			out.Problems = ps
			continue
		}
		key, err := cacheKey(t, c, r.opts.Origins, b)
		if err != nil {
			out.Problems = []*Problem{{Overlay: o, Reason: ReasonInvalid, Message: err.Error()}}
			continue
		}
		if cached, ok := r.opts.Cache.get(key); ok {
			*out = *cached
			out.Cached = true
			continue
		}
		if p := checkInputSize(t, c, r.opts.Limits); p != nil {
			out.Problems = []*Problem{p}
			continue
		}
		jobs = append(jobs, &job{overlay: out, closure: c, key: key, build: b})
	}
	if err := r.run(ctx, t, jobs); err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if cacheable(j.overlay) {
			r.opts.Cache.put(j.key, j.overlay)
		}
	}
	return res, nil
}

// cacheable says whether a result depends only on its inputs: a limit or a
// crash may be the machine's fault, so it is tried again next time.
func cacheable(o *Overlay) bool {
	for _, p := range o.Problems {
		if p.Reason == ReasonLimit || p.Reason == ReasonPanic {
			return false
		}
	}
	return true
}

func checkInputSize(t *Tree, c *closure, l Limits) *Problem {
	var total int64
	for _, f := range c.files {
		n, err := t.Size(f)
		if err != nil {
			return &Problem{Overlay: c.overlay, File: f, Reason: ReasonInvalid, Message: err.Error()}
		}
		if n > l.MaxFile {
			return &Problem{Overlay: c.overlay, File: f, Reason: ReasonLimit,
				Message: fmt.Sprintf("file is %d bytes, over the limit of %d per file", n, l.MaxFile)}
		}
		total += n
	}
	if total > l.MaxInput {
		return &Problem{Overlay: c.overlay, Reason: ReasonLimit,
			Message: fmt.Sprintf("the overlay reads %d bytes of files, over the limit of %d", total, l.MaxInput)}
	}
	return nil
}

// CleanPath writes an overlay path as the tree names it: relative to the
// repository root, without "./" or a trailing slash, "." for the root itself
// (which Flux writes "./" and Argo CD "." or "").
func CleanPath(p string) string {
	p = path.Clean("/" + strings.TrimSpace(p))
	if p == "/" {
		return "."
	}
	return p[1:]
}
