// Package child is the render child: the sandboxed process that builds
// kustomize overlays for the render package, and what it answers with. It
// links kustomize and nothing of Helm: driftback-render, the child for
// overlays that inflate no chart, is this package alone and starts in a
// fraction of driftback's time; driftback itself serves every request,
// Helm's through the Helm hooks the render package gives Serve.
package child

import (
	"bufio"
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
	"github.com/driftback/driftback/render/slots"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// A render child is started with these variables set.
const (
	Env       = "DRIFTBACK_RENDER_CHILD"
	EnvMemory = "DRIFTBACK_RENDER_MEMORY"    // address space limit, bytes
	EnvCPU    = "DRIFTBACK_RENDER_CPU"       // CPU seconds per overlay
	EnvTotal  = "DRIFTBACK_RENDER_CPU_TOTAL" // CPU seconds for the whole child

	// ExitCPULimit is the child's exit status when an overlay used up its CPU time.
	ExitCPULimit = 86
	// ExitAfterPanic is the child's exit status after it reported a kustomize
	// panic: krusty keeps global state, so a fresh child takes the rest.
	ExitAfterPanic = 87
)

// KustomizationNames are the file names kustomize accepts, in its order.
var KustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Request is what the parent sends on the child's standard input: overlays
// of one repository to build, or a request for Helm.
type Request struct {
	Files     map[string][]byte // repository path → content
	Overlays  []string
	MaxOutput int64
	Origins   bool
	// Build holds the overlays' build options other than the defaults.
	Build map[string]BuildOptions
	// Helm, when set, is a request for the Helm hooks instead (a chart to
	// render, a repository index to read), encoded by the render package.
	Helm []byte
}

// NeedsHelm says whether only a child with Helm can answer the request.
func (r *Request) NeedsHelm() bool {
	if len(r.Helm) > 0 {
		return true
	}
	for _, o := range r.Overlays {
		if r.Build[o].EnableHelm {
			return true
		}
	}
	return false
}

// Reply is sent once per overlay, in order, on the child's standard output;
// once for a Helm request.
type Reply struct {
	Overlay string
	YAML    []byte
	Origins []Origin
	Problem *Problem
	Hooks   []string
	// Helm answers a Helm request, encoded by the render package.
	Helm []byte
}

// Helm is what a child that links Helm adds.
type Helm struct {
	// Serve answers a Request's Helm.
	Serve func(req []byte, maxOutput int64) []byte
	// Inflate inflates an overlay's helmCharts in fs, as kustomize build
	// --enable-helm does.
	Inflate func(fs filesys.FileSystem, dir string, b BuildOptions) *Problem
}

// Serve turns the process into a render child when it was started as one,
// and never returns in that case. Call it first thing in main, and in
// TestMain of any test binary that renders. h is nil in a child that links
// no Helm: a request that needs it is refused.
func Serve(h *Helm) {
	if os.Getenv(Env) != "1" {
		return
	}
	os.Exit(run(os.Stdin, os.Stdout, h))
}

// errNoHelm is what a child without Helm says of a request that needs it
// (the render package sends it none).
var errNoHelm = errors.New("this render child links no Helm (driftback-render): driftback renders charts")

func run(in io.Reader, out io.Writer, h *Helm) int {
	if err := confine(); err != nil {
		fmt.Fprintln(os.Stderr, "render child:", err)
		return 1
	}
	var req Request
	if err := gob.NewDecoder(bufio.NewReader(in)).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "render child: read request:", err)
		return 1
	}
	if h == nil && req.NeedsHelm() {
		fmt.Fprintln(os.Stderr, "render child:", errNoHelm)
		return 1
	}
	cpu, _ := strconv.Atoi(os.Getenv(EnvCPU))
	if len(req.Helm) > 0 {
		if cpu > 0 {
			if err := slots.LimitCPU(cpu); err != nil {
				fmt.Fprintln(os.Stderr, "render child:", err)
				return 1
			}
		}
		if err := gob.NewEncoder(out).Encode(Reply{Helm: h.Serve(req.Helm, req.MaxOutput)}); err != nil {
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
	for _, o := range req.Overlays {
		if cpu > 0 {
			if err := slots.LimitCPU(cpu); err != nil {
				fmt.Fprintln(os.Stderr, "render child:", err)
				return 1
			}
		}
		reply, panicked := build(fs, o, req.MaxOutput, req.Origins, req.Build[o], h)
		if err := enc.Encode(reply); err != nil {
			fmt.Fprintln(os.Stderr, "render child: write reply:", err)
			return 1
		}
		if err := w.Flush(); err != nil {
			return 1
		}
		if panicked {
			return ExitAfterPanic
		}
	}
	return 0
}

// Reason classifies a Problem so callers can branch on it and show it.
type Reason string

// Reasons a render can fail.
const (
	ReasonOutsideRepo Reason = "outside-repo" // a path leaves the repository or is absolute
	ReasonSymlink     Reason = "symlink"      // a path goes through a symlink or submodule
	ReasonRemote      Reason = "remote"       // an http(s), git or file:// resource or base
	ReasonHelm        Reason = "helm"         // helmCharts and friends
	ReasonPlugin      Reason = "plugin"       // exec, KRM-function or Go plugins
	ReasonNotFound    Reason = "not-found"    // a referenced file or directory is missing
	ReasonInvalid     Reason = "invalid"      // malformed YAML or kustomization
	ReasonLimit       Reason = "limit"        // input size, memory, CPU or time limit exceeded
	ReasonPanic       Reason = "panic"        // kustomize panicked or the render child crashed
	ReasonKustomize   Reason = "kustomize"    // any other error kustomize returned
)

// Problem is one thing wrong with an overlay, meant for the person who can fix
// it: it names the file (and line, when known) and says why.
type Problem struct {
	Overlay string // overlay directory, repository-relative
	File    string // file at fault, repository-relative; empty when unknown
	Line    int    // 1-based line in File; 0 when unknown
	Reason  Reason
	Message string
}

func (p *Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	} else if p.Overlay != "" {
		b.WriteString(p.Overlay + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Origin says where a rendered object came from.
type Origin struct {
	// Path is the repository-relative file the object was read from; empty for
	// objects a generator made.
	Path string `json:"path,omitempty"`
	// ConfiguredIn is the repository-relative kustomization (or generator
	// config) that generated the object; empty for objects read from a file.
	ConfiguredIn string `json:"configuredIn,omitempty"`
	// ConfiguredBy names the generator kind, such as "ConfigMapGenerator" (with
	// "/name" for a generator config that has a name).
	ConfiguredBy string `json:"configuredBy,omitempty"`
}

// BuildOptions change how kustomize builds, for reconcilers that build
// differently from `kustomize build`.
type BuildOptions struct {
	// LoadAnywhere lets a kustomization load files from anywhere in the
	// repository, not only at or below its own directory, as
	// kustomize-controller does (kustomize's LoadRestrictionsNone). Nothing
	// outside the repository is ever readable.
	LoadAnywhere bool
	// WithoutArgoCDHooks leaves Argo CD's hooks (internal/argocd.IsHook) out of the
	// overlay's resource files before kustomize reads them, as Argo CD
	// leaves them out of what it compares and prunes: it runs them at sync.
	// A hook may have no name (generateName), which kustomize refuses.
	WithoutArgoCDHooks bool
	// EnableHelm inflates helmCharts as kustomize build --enable-helm
	// --helm-kube-version --helm-api-versions does (charts in the tree).
	EnableHelm      bool
	HelmKubeVersion string
	HelmAPIVersions []string
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
	mem, _ := strconv.ParseInt(os.Getenv(EnvMemory), 10, 64)
	total, _ := strconv.ParseInt(os.Getenv(EnvTotal), 10, 64)
	return slots.Confine(mem, total, ExitCPULimit)
}

// build runs kustomize on one overlay. With origins, origin annotations are
// switched on so every object can say where it came from, then stripped so the
// output is still what `kubectl kustomize` prints.
func build(fs filesys.FileSystem, overlay string, maxOutput int64, withOrigins bool, b BuildOptions, h *Helm) (reply Reply, panicked bool) {
	reply.Overlay = overlay
	defer func() {
		if r := recover(); r != nil {
			reply = Reply{Overlay: overlay, Problem: &Problem{Overlay: overlay, Reason: ReasonPanic,
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
		if h == nil {
			reply.Problem = &Problem{Overlay: overlay, Reason: ReasonHelm, Message: errNoHelm.Error()}
			return reply, false
		}
		if p := h.Inflate(fs, dir, b); p != nil {
			p.Overlay = overlay
			reply.Problem = p
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
	for _, n := range KustomizationNames {
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
