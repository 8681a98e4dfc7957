package render

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/driftback/driftback/internal/argocd"
	"github.com/driftback/driftback/render/helm"
	"github.com/driftback/driftback/render/slots"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The render child is driftback itself, started with these variables set.
const (
	childEnv       = "DRIFTBACK_RENDER_CHILD"
	childMemoryEnv = "DRIFTBACK_RENDER_MEMORY"    // address space limit, bytes
	childCPUEnv    = "DRIFTBACK_RENDER_CPU"       // CPU seconds per overlay
	childTotalEnv  = "DRIFTBACK_RENDER_CPU_TOTAL" // CPU seconds for the whole child

	// exitCPULimit is the child's exit status when an overlay used up its CPU time.
	exitCPULimit = 86
	// exitAfterPanic is the child's exit status after it reported a kustomize
	// panic: krusty keeps global state, so a fresh child takes the rest.
	exitAfterPanic = 87
)

// childRequest is what the parent sends on the child's standard input.
type childRequest struct {
	Files     map[string][]byte // repository path → content
	Overlays  []string
	MaxOutput int64
	Origins   bool
	// Build holds the overlays' build options other than the defaults.
	Build map[string]BuildOptions
	// Chart, when set, is rendered instead of overlays.
	Chart *Chart
	// Index, when set, is a repository's index.yaml, parsed for
	// IndexChart's versions instead.
	Index      []byte
	IndexChart string
}

// childReply is sent once per overlay, in order, on the child's standard output.
type childReply struct {
	Overlay string
	YAML    []byte
	Origins []Origin
	Problem *Problem
	Hooks   []string
	// Chart answers a request's Chart, Index its Index.
	Chart *chartReply
	Index *indexReply
}

// ServeChild turns the process into a render child when it was started as one,
// and never returns in that case. Call it first thing in main, and in TestMain
// of any test binary that renders.
func ServeChild() {
	if os.Getenv(childEnv) != "1" {
		return
	}
	os.Exit(runChild(os.Stdin, os.Stdout))
}

func runChild(in io.Reader, out io.Writer) int {
	if err := confine(); err != nil {
		fmt.Fprintln(os.Stderr, "render child:", err)
		return 1
	}
	var req childRequest
	if err := gob.NewDecoder(bufio.NewReader(in)).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "render child: read request:", err)
		return 1
	}
	if req.Chart != nil || req.Index != nil {
		if cpu, _ := strconv.Atoi(os.Getenv(childCPUEnv)); cpu > 0 {
			if err := slots.LimitCPU(cpu); err != nil {
				fmt.Fprintln(os.Stderr, "render child:", err)
				return 1
			}
		}
		var reply childReply
		if req.Chart != nil {
			chart := renderChart(req.Chart, req.MaxOutput)
			reply.Chart = &chart
		} else {
			index := chartIndex(&req)
			reply.Index = &index
		}
		if err := gob.NewEncoder(out).Encode(reply); err != nil {
			fmt.Fprintln(os.Stderr, "render child: write reply:", err)
			return 1
		}
		return 0
	}
	fs := filesys.MakeFsInMemory()
	for p, b := range req.Files {
		if err := fs.WriteFile("/"+p, b); err != nil {
			fmt.Fprintln(os.Stderr, "render child:", err)
			return 1
		}
	}
	w := bufio.NewWriter(out)
	enc := gob.NewEncoder(w)
	cpu, _ := strconv.Atoi(os.Getenv(childCPUEnv))
	for _, o := range req.Overlays {
		if cpu > 0 {
			if err := slots.LimitCPU(cpu); err != nil {
				fmt.Fprintln(os.Stderr, "render child:", err)
				return 1
			}
		}
		reply, panicked := build(fs, o, req.MaxOutput, req.Origins, req.Build[o])
		if err := enc.Encode(reply); err != nil {
			fmt.Fprintln(os.Stderr, "render child: write reply:", err)
			return 1
		}
		if err := w.Flush(); err != nil {
			return 1
		}
		if panicked {
			return exitAfterPanic
		}
	}
	return 0
}

// refusingTransport fails every request: kustomize fetches http(s) resources
// with the default transport before any restriction applies.
type refusingTransport struct{}

func (refusingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("network access is disabled while rendering (refused %s %s)", r.Method, r.URL.Redacted())
}

// confine applies the child's limits before it reads any untrusted byte:
// no network, and the memory and CPU its parent gave it.
func confine() error {
	http.DefaultTransport = refusingTransport{}
	http.DefaultClient = &http.Client{Transport: refusingTransport{}}
	mem, _ := strconv.ParseInt(os.Getenv(childMemoryEnv), 10, 64)
	total, _ := strconv.ParseInt(os.Getenv(childTotalEnv), 10, 64)
	return slots.Confine(mem, total, exitCPULimit)
}

// build runs kustomize on one overlay. With origins, origin annotations are
// switched on so every object can say where it came from, then stripped so the
// output is still what `kubectl kustomize` prints.
func build(fs filesys.FileSystem, overlay string, maxOutput int64, withOrigins bool, b BuildOptions) (reply childReply, panicked bool) {
	reply.Overlay = overlay
	defer func() {
		if r := recover(); r != nil {
			reply = childReply{Overlay: overlay, Problem: &Problem{Overlay: overlay, Reason: ReasonPanic,
				Message: fmt.Sprintf("kustomize crashed on this overlay (%v); the input is malformed", r)}}
			panicked = true
		}
	}()
	dir := path.Join("/", overlay) // "/" for the repository root
	if b.WithoutArgoCDHooks {
		var err error
		if reply.Hooks, err = argocd.DropHooks(fs, dir); err != nil {
			reply.Problem = &Problem{Overlay: overlay, Reason: ReasonInvalid, Message: err.Error()}
			return reply, false
		}
	}
	if b.EnableHelm {
		if err := helm.Inflate(context.Background(), fs, dir, helm.InflateOptions{KubeVersion: b.HelmKubeVersion, APIVersions: b.HelmAPIVersions}); err != nil {
			reply.Problem = &Problem{Overlay: overlay, Reason: ReasonHelm, Message: err.Error()}
			if ie := (*helm.InflateError)(nil); errors.As(err, &ie) {
				reply.Problem.File, reply.Problem.Message = ie.File, ie.Message
			}
			return reply, false
		}
	}
	keep := true
	if withOrigins {
		var err error
		if keep, err = enableOrigins(fs, dir); err != nil {
			reply.Problem = &Problem{Overlay: overlay, Reason: ReasonInvalid, Message: err.Error()}
			return reply, false
		}
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	if b.LoadAnywhere {
		// The in-memory file system holds the repository and nothing else.
		opts.LoadRestrictions = types.LoadRestrictionsNone
	}
	opts.PluginConfig = types.DisabledPluginConfig()
	// kubectl kustomize sorts in the legacy order unless the kustomization sets
	// sortOptions; "unspecified" does exactly that (the library default is none).
	opts.Reorder = krusty.ReorderOptionUnspecified
	m, err := krusty.MakeKustomizer(opts).Run(fs, dir)
	if err != nil {
		reply.Problem = kustomizeProblem(overlay, err)
		return reply, false
	}
	if withOrigins {
		if reply.Origins, err = origins(m, overlay); err != nil {
			reply.Problem = &Problem{Overlay: overlay, Reason: ReasonKustomize, Message: err.Error()}
			return reply, false
		}
	}
	if !keep {
		if err := m.RemoveOriginAnnotations(); err != nil {
			reply.Problem = &Problem{Overlay: overlay, Reason: ReasonKustomize, Message: err.Error()}
			return reply, false
		}
	}
	out, err := m.AsYaml()
	if err != nil {
		reply.Problem = &Problem{Overlay: overlay, Reason: ReasonKustomize, Message: err.Error()}
		return reply, false
	}
	if maxOutput > 0 && int64(len(out)) > maxOutput {
		reply.Origins = nil
		reply.Problem = &Problem{Overlay: overlay, Reason: ReasonLimit,
			Message: fmt.Sprintf("the rendered output is %d bytes, over the limit of %d", len(out), maxOutput)}
		return reply, false
	}
	reply.YAML = out
	return reply, false
}

// enableOrigins adds originAnnotations to the overlay's buildMetadata in the
// in-memory copy. It reports whether the overlay asked for them itself, in
// which case they stay in the output as kustomize would print them.
func enableOrigins(fs filesys.FileSystem, dir string) (keep bool, err error) {
	var file string
	for _, n := range kustomizationNames {
		if fs.Exists(path.Join(dir, n)) {
			file = path.Join(dir, n)
			break
		}
	}
	if file == "" {
		return false, nil // krusty says what is missing
	}
	b, err := fs.ReadFile(file)
	if err != nil {
		return false, err
	}
	node, err := yaml.Parse(string(b))
	if err != nil {
		return false, nil // krusty reports the syntax error with its own words
	}
	bm, err := node.Pipe(yaml.Lookup("buildMetadata"))
	if err != nil {
		return false, nil
	}
	var values []string
	if bm != nil {
		for _, n := range bm.YNode().Content {
			if n.Value == types.OriginAnnotations {
				return true, nil
			}
			values = append(values, n.Value)
		}
	}
	values = append(values, types.OriginAnnotations)
	if err := node.PipeE(yaml.SetField("buildMetadata", yaml.NewListRNode(values...))); err != nil {
		return false, nil
	}
	s, err := node.String()
	if err != nil {
		return false, err
	}
	return false, fs.WriteFile(file, []byte(s))
}

// origins reads each resource's origin annotation, turning the paths kustomize
// records relative to the overlay into repository paths.
func origins(m resmap.ResMap, overlay string) ([]Origin, error) {
	out := make([]Origin, 0, m.Size())
	for _, r := range m.Resources() {
		o, err := r.GetOrigin()
		if err != nil {
			return nil, fmt.Errorf("%s: read origin: %w", r.CurId(), err)
		}
		var or Origin
		if o != nil {
			if o.Path != "" {
				or.Path = repoPath(overlay, o.Path)
			}
			if o.ConfiguredIn != "" {
				or.ConfiguredIn = repoPath(overlay, o.ConfiguredIn)
				or.ConfiguredBy = o.ConfiguredBy.Kind
				if o.ConfiguredBy.Name != "" {
					or.ConfiguredBy += "/" + o.ConfiguredBy.Name
				}
			}
		}
		out = append(out, or)
	}
	return out, nil
}

func repoPath(overlay, rel string) string {
	return strings.TrimPrefix(path.Join(overlay, rel), "/")
}

// kustomizeProblem classifies a kustomize error.
func kustomizeProblem(overlay string, err error) *Problem {
	msg := err.Error()
	reason := ReasonKustomize
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "external plugins disabled") || strings.Contains(lower, "plugins disabled") ||
		strings.Contains(lower, "unable to load builtin") || strings.Contains(lower, "krm function"):
		reason = ReasonPlugin
	case strings.Contains(lower, "must specify --enable-helm"):
		reason = ReasonHelm
	case strings.Contains(lower, "network access is disabled") || strings.Contains(lower, "no 'git' program"):
		reason = ReasonRemote
	case errors.Is(err, syscall.ENOMEM):
		reason = ReasonLimit
	}
	// Paths in kustomize's messages are rooted at the in-memory "/": show them
	// as repository paths.
	msg = strings.ReplaceAll(msg, "'/", "'")
	msg = strings.ReplaceAll(msg, " /", " ")
	return &Problem{Overlay: overlay, Reason: reason, Message: msg}
}
