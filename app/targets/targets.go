// Package targets is the set of targets driftback compares and watches: app.yml's,
// merged with the reconciler objects discovery finds (Flux Kustomizations, Argo CD
// Applications), glob paths expanded, refined by a repository's own
// .github/driftback.yml.
package targets

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/driftback/driftback/app/config"
	"github.com/driftback/driftback/discover"
	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/reconcile"
	"github.com/driftback/driftback/render"
	"github.com/driftback/driftback/report/valuediff"
)

// Target is one overlay of one repository deployed to one cluster: as
// app.yml names it, or as a reconciler object was found, or both.
type Target struct {
	config.Target
	// Found is the reconciler object the target was discovered from, or
	// matched with; nil for app.yml alone.
	Found *discover.Found
	// Glob is the app.yml path pattern the target was expanded from.
	Glob string
	// FromConfig says app.yml names the target (or a glob matching it).
	FromConfig bool
	// DriftKey names the target's drift branch and issue; "" is the slug
	// of its name (see driftKeys).
	DriftKey string
	// CodifyOff says why drift is not proposed when the policy alone
	// would propose it.
	CodifyOff string
	// Unnamed says app.yml names neither a target on the repository nor lets
	// the object's namespace name it: whoever made the object chose the
	// repository, so its drift is not proposed and its check is advisory.
	Unnamed bool
}

// Build is what building the target as its reconciler does reads of it.
func (t Target) Build() reconcile.Target {
	return reconcile.Target{Name: t.Name, Repo: t.Repo, Path: t.Path, Cluster: t.Cluster, Tracking: t.Tracking, Found: t.Found}
}

// Builds are the targets' Build, in order.
func Builds(ts []Target) []reconcile.Target {
	out := make([]reconcile.Target, len(ts))
	for i, t := range ts {
		out[i] = t.Build()
	}
	return out
}

// Named says whether app.yml names repo for an object discovered in
// namespace on cluster: a target of app.yml is on it, or the cluster's
// discover.repositories lets that namespace name it.
func Named(cfg *config.Config, cluster, namespace, repo string) bool {
	for _, t := range cfg.Targets {
		if strings.EqualFold(t.Repo, repo) {
			return true
		}
	}
	d := cfg.Clusters[cluster].Discover
	return d != nil && len(d.Repositories[namespace]) > 0 && d.Allows(namespace, repo)
}

// Slug is what names the target's drift branch and drift issue: unique
// among the targets, whatever their names.
func (t Target) Slug() string {
	if t.DriftKey != "" {
		return t.DriftKey
	}
	return config.Slug(t.Name)
}

// DriftKeys makes the targets' slugs unique, whatever the names: a
// discovered target whose slug another target's shares, plainly or once
// made unique, gets a hash of its whole name (64 bits: no one finds a name
// that meets another's), so that drift branches and issues never meet.
// app.yml's own targets keep their plain slugs (its validation keeps them
// apart): a reconciler object cannot move their drift branch by taking a
// name like theirs.
func DriftKeys(ts []Target) {
	keys := make([]string, len(ts))
	hashed := make([]bool, len(ts))
	for i, t := range ts {
		keys[i] = config.Slug(t.Name)
	}
	for changed := true; changed; {
		changed = false
		// Of each group sharing a key, the discovered targets not hashed
		// yet take a hash; app.yml's only when no discovered one is left.
		groups := map[string][]int{}
		for i, k := range keys {
			groups[k] = append(groups[k], i)
		}
		for _, g := range groups {
			if len(g) < 2 {
				continue
			}
			var discovered, configured []int
			for _, i := range g {
				switch {
				case hashed[i]:
				case ts[i].FromConfig:
					configured = append(configured, i)
				default:
					discovered = append(discovered, i)
				}
			}
			if len(discovered) == 0 {
				discovered = configured
			}
			for _, i := range discovered {
				h := sha256.Sum256([]byte(ts[i].Name))
				keys[i], hashed[i], changed = config.Slug(ts[i].Name)+"-"+hex.EncodeToString(h[:8]), true, true
			}
		}
	}
	for i := range ts {
		if hashed[i] {
			ts[i].DriftKey = keys[i]
		}
	}
}

// Configured are app.yml's targets, as targets.
func Configured(cfg *config.Config) []Target {
	out := make([]Target, len(cfg.Targets))
	for i, t := range cfg.Targets {
		out[i] = Target{Target: t, FromConfig: true}
	}
	return out
}

// Refine applies a repository's .github/driftback.yml to its targets
// (config.Refine), keeping where each was found.
func Refine(targets []Target, content []byte) ([]Target, error) {
	cts := make([]config.Target, len(targets))
	for i, t := range targets {
		cts[i] = t.Target
	}
	refined, err := config.Refine(cts, content)
	if err != nil {
		return targets, err
	}
	out := append([]Target(nil), targets...)
	for i := range out {
		out[i].Target = refined[i]
	}
	return out, nil
}

// IsGlob says a target path is a pattern.
func IsGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// Source is where the targets come from: app.yml and, for clusters
// with discover:, the reconcilers' objects, followed as they change.
type Source struct {
	cfg *config.Config
	log *slog.Logger

	mu       sync.Mutex
	watchers map[string]*discover.Watcher
	// onChange is called after the discovered targets change.
	onChange func()
}

// NewSource follows the targets of cfg; Run starts discovery.
func NewSource(cfg *config.Config, log *slog.Logger) *Source {
	return &Source{cfg: cfg, log: log, watchers: map[string]*discover.Watcher{}}
}

// settings map what a cluster's discovery finds onto app.yml.
func (s *Source) settings(cluster string) discover.Settings {
	d := s.cfg.Clusters[cluster].Discover
	return discover.Settings{
		On: cluster, Host: discover.HostOf(s.cfg.GitHub.APIURL),
		Destinations: d.Destinations, ArgoCDNamespace: d.ArgoCDNamespace,
		FluxLenientSubstitution: d.FluxSubstitution == "lenient", FluxDefaultServiceAccount: d.FluxDefaultServiceAccount,
	}
}

// Options are what a cluster's discovery reads.
func (s *Source) Options(cluster string) discover.Options {
	d := s.cfg.Clusters[cluster].Discover
	return discover.Options{Flux: d.Flux, ArgoCD: d.ArgoCD, Namespaces: d.Where(), Settings: s.settings(cluster)}
}

// Discovering are the clusters with discovery, sorted.
func (s *Source) Discovering() []string {
	var out []string
	for name, c := range s.cfg.Clusters {
		if c.Discover.Enabled() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Run follows every discovering cluster until ctx ends; a cluster that
// cannot be reached is tried again.
func (s *Source) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, name := range s.Discovering() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runCluster(ctx, name)
		}()
	}
	wg.Wait()
}

func (s *Source) runCluster(ctx context.Context, name string) {
	log := s.log.With("cluster", name)
	backoff := time.Second
	for ctx.Err() == nil {
		cfg, err := s.cfg.Clusters[name].RESTConfig()
		var w *discover.Watcher
		if err == nil {
			w, err = discover.NewWatcher(cfg, s.Options(name))
		}
		if err != nil {
			log.Error("cannot read the cluster's reconcilers; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Minute)
			continue
		}
		s.mu.Lock()
		s.watchers[name] = w
		s.mu.Unlock()
		go w.Run(ctx)
		var reported string
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.Changed():
			}
			found := w.Found()
			if p := strings.Join(w.Problems(), "; "); p != reported {
				if p != "" {
					log.Warn("discovery cannot read everything", "problems", p)
				}
				reported = p
			}
			log.Info("discovered targets", "objects", len(found))
			s.mu.Lock()
			fn := s.onChange
			s.mu.Unlock()
			if fn != nil {
				fn()
			}
		}
	}
}

// Found is every discovered object, of every cluster.
func (s *Source) Found() []*discover.Found {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*discover.Found
	for _, w := range s.watchers {
		out = append(out, w.Found()...)
	}
	discover.Sort(out)
	return out
}

// Health is the state of a discovered object's reconciler now; unknown when
// its cluster is not being read.
func (s *Source) Health(f *discover.Found, now time.Time) discover.Health {
	s.mu.Lock()
	w := s.watchers[f.On]
	s.mu.Unlock()
	if w == nil {
		return discover.Health{}
	}
	return w.Health(f, now)
}

// Object is a discovered object as it is now, status included; nil when
// its cluster is not read or it is gone.
func (s *Source) Object(f *discover.Found) *unstructured.Unstructured {
	s.mu.Lock()
	w := s.watchers[f.On]
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.Object(f)
}

// notApplying names a cluster's reconciler objects that fail or have
// stalled, with why (quoted: the reconciler's words are the cluster's).
func notApplying(cluster string, w *discover.Watcher) []string {
	var out []string
	now := time.Now()
	for _, f := range w.Found() {
		if f.Suspended != "" || f.NotRendered != "" {
			continue
		}
		if h := w.Health(f, now); h.Blocks() {
			since := ""
			if !h.Since.IsZero() {
				since = " since " + h.Since.UTC().Format(time.RFC3339)
			}
			out = append(out, fmt.Sprintf("reconciler on %s: %s is %s%s: %s", cluster, f.Object, h.State, since, strconv.Quote(valuediff.Cut(h.Why))))
		}
	}
	return out
}

// Synced says every discovering cluster has been read once.
func (s *Source) Synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range s.Discovering() {
		if w := s.watchers[name]; w == nil || !w.Synced() {
			return false
		}
	}
	return true
}

// WaitSynced waits, up to a bound, for discovery's first read, so a pull
// request that arrives as driftback starts is not compared without its
// discovered targets.
func (s *Source) WaitSynced(ctx context.Context, bound time.Duration) {
	if len(s.Discovering()) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for !s.Synced() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Problems are what discovery cannot read, for a pull request's comment:
// a target it would find is missing from it.
func (s *Source) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, name := range s.Discovering() {
		w := s.watchers[name]
		if w == nil || !w.Synced() {
			out = append(out, fmt.Sprintf("discovery on cluster %s has not read its reconcilers: targets it would find are missing from this comparison", name))
			continue
		}
		for _, p := range w.Problems() {
			out = append(out, fmt.Sprintf("discovery on cluster %s: %s", name, p))
		}
	}
	return out
}

// SetOnChange sets what is called after the discovered targets change.
func (s *Source) SetOnChange(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = fn
}

// Status says, per discovering cluster, what discovery found and what it
// cannot read, for /readyz.
func (s *Source) Status() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, name := range s.Discovering() {
		w := s.watchers[name]
		switch {
		case w == nil:
			out = append(out, fmt.Sprintf("discovery on %s: not connected", name))
		case !w.Synced():
			out = append(out, fmt.Sprintf("discovery on %s: reading", name))
		default:
			out = append(out, fmt.Sprintf("discovery on %s: %d reconciler objects", name, len(w.Found())))
		}
		if w != nil {
			for _, p := range w.Problems() {
				out = append(out, fmt.Sprintf("discovery on %s: %s", name, p))
			}
			out = append(out, notApplying(name, w)...)
		}
		out = append(out, s.leftOut(name, w)...)
	}
	return out
}

// LeftOut says, per discovering cluster, what its discovery leaves out
// (reconciler objects in namespaces it does not read), naming the setting
// that brings them in.
func (s *Source) LeftOut() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, name := range s.Discovering() {
		out = append(out, s.leftOut(name, s.watchers[name])...)
	}
	return out
}

// LeftOutOn counts what discovery on cluster leaves out, by kind.
func (s *Source) LeftOutOn(cluster string) []discover.LeftOut {
	s.mu.Lock()
	w := s.watchers[cluster]
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	counts, _ := w.LeftOut()
	return counts
}

func (s *Source) leftOut(cluster string, w *discover.Watcher) []string {
	if w == nil {
		return nil
	}
	counts, why := w.LeftOut()
	return SayLeftOut(cluster, counts, why)
}

// SayLeftOut is what discovery on cluster leaves out, for a person.
func SayLeftOut(cluster string, counts []discover.LeftOut, why string) []string {
	var out []string
	if why != "" {
		out = append(out, fmt.Sprintf("discovery on %s: whether it leaves reconciler objects out is unknown: %s", cluster, why))
	}
	for _, l := range counts {
		out = append(out, fmt.Sprintf("discovery on %s: %s", cluster, l.Say("clusters."+cluster+".discover.namespaces")))
	}
	return out
}

// All are every target: app.yml's (glob paths not yet expanded) merged
// with the discovered ones, and the discovered sources that cannot be
// rendered.
func (s *Source) All() ([]Target, []*discover.Found) {
	return Merge(s.cfg, s.Found())
}

// Of are a repository's targets and unrenderable sources.
func (s *Source) Of(repo string) ([]Target, []*discover.Found) {
	all, skipped := s.All()
	var out []Target
	for _, t := range all {
		if strings.EqualFold(t.Repo, repo) {
			out = append(out, t)
		}
	}
	var sk []*discover.Found
	for _, f := range skipped {
		if strings.EqualFold(f.Repo, repo) {
			sk = append(sk, f)
		}
	}
	return out, sk
}

// Merge merges app.yml's targets with discovered ones by (repo, path,
// cluster): app.yml's name, policy and scope win; discovery adds what the
// reconciler does (branch, tracking, its ignore rules, how it builds). A
// discovered object matching an app.yml glob takes that target's settings.
// Two objects claiming one (repo, path, cluster) are two targets, both
// compared. Discovered sources that cannot be rendered are returned apart,
// with a repo only when they name one.
func Merge(cfg *config.Config, found []*discover.Found) ([]Target, []*discover.Found) {
	out, globs := Configured(cfg), Configured(cfg)
	byKey := map[string]int{}
	for i, t := range out {
		if !IsGlob(t.Path) {
			byKey[discover.TargetKey(t.Repo, t.Path, t.Cluster)] = i
		}
	}
	var skipped []*discover.Found
	for _, f := range found {
		if d := cfg.Clusters[f.On].Discover; d != nil && f.Repo != "" && !d.Allows(f.Namespace, f.Repo) {
			c := *f
			c.NotRendered = fmt.Sprintf("objects in namespace %s may not name repository %s (clusters.%s.discover.repositories)", f.Namespace, f.Repo, f.On)
			f = &c
		}
		if f.NotRendered != "" || f.Repo == "" {
			skipped = append(skipped, f)
			continue
		}
		if i, ok := byKey[f.Key()]; ok {
			if other := out[i].Found; other != nil {
				// Two reconciler objects apply one path to one cluster
				// (with different variables, or one a decoy): neither is
				// chosen by sort order. Both are compared, each with its
				// own build, tracking and prune, and each says so; the
				// drift of neither is proposed, since which one's build
				// the cluster holds is not known.
				conflict := fmt.Sprintf("%s and %s both apply this path to this cluster: each is compared as it builds", other.Object, f.Object)
				out[i].Found = withNote(other, conflict)
				out[i].Policy.Codify, out[i].CodifyOff = config.CodifyOff, conflict+"; drift is proposed once one of them remains"
				t := Target{Target: config.Target{Name: foundName(f), Repo: f.Repo, Path: f.Path, Cluster: f.Cluster}}
				t.Policy.AckLabel = config.DefaultAckLabel
				t.Policy.DriftDefaults()
				switch g := globFor(globs, f); {
				case i < len(cfg.Targets): // app.yml's, before any object's settings
					t.Policy, t.Scope, t.FromConfig = cfg.Targets[i].Policy, cfg.Targets[i].Scope, true
				case g != nil:
					t.Policy, t.Scope, t.FromConfig, t.Glob = g.Policy, g.Scope, true, g.Path
				}
				t.Policy.Codify, t.CodifyOff = config.CodifyOff, out[i].CodifyOff
				if !t.FromConfig && !Named(cfg, f.On, f.Namespace, f.Repo) {
					// As any object on a repository app.yml does not
					// name: its check is advisory.
					t.Unnamed = true
				}
				out = append(out, withFound(t, withNote(f, conflict)))
				continue
			}
			out[i] = withFound(out[i], f)
			continue
		}
		if g := globFor(globs, f); g != nil {
			t := *g
			t.Path, t.Name, t.Glob, t.FromConfig = f.Path, globName(*g, f.Path), g.Path, true
			byKey[f.Key()] = len(out)
			out = append(out, withFound(t, f))
			continue
		}
		t := Target{Target: config.Target{Name: foundName(f), Repo: f.Repo, Path: f.Path, Cluster: f.Cluster}}
		t.Policy.AckLabel = config.DefaultAckLabel
		t.Policy.DriftDefaults()
		if !Named(cfg, f.On, f.Namespace, f.Repo) {
			// Whoever made the object chose the repository: driftback
			// does not push to it unless the operator says so.
			t.Policy.Codify, t.Unnamed = config.CodifyOff, true
			t.CodifyOff = "app.yml names no target on this repository, nor lets " + f.Namespace + " name it in discover.repositories"
		}
		byKey[f.Key()] = len(out)
		out = append(out, withFound(t, f))
	}
	DriftKeys(out)
	return out, skipped
}

// globFor is the app.yml glob target a discovered object's path matches.
func globFor(targets []Target, f *discover.Found) *Target {
	for i, t := range targets {
		if !IsGlob(t.Path) || !strings.EqualFold(t.Repo, f.Repo) || t.Cluster != f.Cluster {
			continue
		}
		if ok, _ := path.Match(render.CleanPath(t.Path), f.Path); ok {
			return &targets[i]
		}
	}
	return nil
}

// foundName names a discovered target: cluster/namespace/name of the
// reconciler object.
func foundName(f *discover.Found) string {
	c := f.Cluster
	if c == "" {
		c = f.On
	}
	return c + "/" + f.Namespace + "/" + f.Name
}

// withFound adds what a reconciler does to a target.
func withFound(t Target, f *discover.Found) Target {
	t.Found = f
	if t.Branch == "" {
		t.Branch = f.Branch
	}
	if t.Tracking == (drift.Tracking{}) {
		t.Tracking = f.Tracking
	}
	t.Policy.Ignore = append(append([]object.IgnoreRule{}, t.Policy.Ignore...), f.Ignore...)
	// Flux reapplies Git every interval: a live change that lasts less than
	// that is reverted by the reconciler, not a change to propose.
	if f.Interval > 0 && t.Policy.QuietPeriod < f.Interval+30*time.Second {
		t.Policy.QuietPeriod = f.Interval + 30*time.Second
	}
	return t
}

// withNote is a copy of f that also says note: the objects discovery
// returns are shared and never changed.
func withNote(f *discover.Found, note string) *discover.Found {
	c := *f
	c.Notes = append(append([]string(nil), f.Notes...), note)
	return &c
}

// globName names one match of a glob target: the matched path, after the
// target's own name when it has one.
func globName(g Target, match string) string {
	if g.Name == "" || g.Name == g.Path {
		return match
	}
	return g.Name + " " + match
}

// ExpandGlobs replaces glob targets with one target per directory they
// match that holds a kustomization, in any of trees; a match already a
// target (from app.yml or discovery) is not added twice.
func ExpandGlobs(targets []Target, trees ...*render.Tree) []Target {
	var out []Target
	have := map[string]bool{}
	for _, t := range targets {
		if !IsGlob(t.Path) {
			have[discover.TargetKey(t.Repo, t.Path, t.Cluster)] = true
		}
	}
	for _, t := range targets {
		if !IsGlob(t.Path) {
			out = append(out, t)
			continue
		}
		pattern := render.CleanPath(t.Path)
		matches := map[string]bool{}
		for _, tree := range trees {
			if tree == nil {
				continue
			}
			for _, dir := range render.Discover(tree) {
				if ok, _ := path.Match(pattern, dir); ok {
					matches[dir] = true
				}
			}
		}
		for _, dir := range sortedSet(matches) {
			if have[discover.TargetKey(t.Repo, dir, t.Cluster)] {
				continue
			}
			e := t
			e.Path, e.Name, e.Glob = dir, globName(t, dir), t.Path
			have[discover.TargetKey(t.Repo, dir, t.Cluster)] = true
			out = append(out, e)
		}
	}
	return out
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NotRendered lists unrenderable sources for a report.
func NotRendered(fs []*discover.Found) []drift.NotRendered {
	var out []drift.NotRendered
	for _, f := range fs {
		why := f.NotRendered
		if why == "" {
			why = "its source is not a repository on the configured GitHub host"
		}
		out = append(out, drift.NotRendered{Source: f.Object, Cluster: f.On, Path: f.Path, Reason: why})
	}
	return out
}

// Describe says where a target comes from, for `driftback targets`.
func (t Target) Describe() string {
	switch {
	case t.Found != nil && t.FromConfig:
		return fmt.Sprintf("app.yml, with %s on cluster %s", t.Found.Object, t.Found.On)
	case t.Found != nil:
		return fmt.Sprintf("%s on cluster %s", t.Found.Object, t.Found.On)
	case t.Glob != "":
		return "app.yml glob " + t.Glob
	default:
		return "app.yml"
	}
}

// Key identifies a target across checks: its repository and name.
func Key(t Target) string { return strings.ToLower(t.Repo) + " " + t.Name }

// Touched are the sources with a changed file under their path.
func Touched(fs []*discover.Found, changed []string) []*discover.Found {
	var out []*discover.Found
	for _, f := range fs {
		for _, c := range changed {
			if f.Path == "." || f.Path == "" || c == f.Path || strings.HasPrefix(c, f.Path+"/") {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// WatchedOn are the targets of a cluster with drift to watch: not off, and
// not left to a reconciler that reverts live changes itself.
func WatchedOn(all []Target, cluster string) []Target {
	var out []Target
	for _, t := range all {
		if t.Cluster != cluster || t.Policy.Codify == config.CodifyOff || (t.Found != nil && t.Found.SelfHeal) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// ReadByOthers are, of files (a write-back's edits), those another target
// of t's repository and branch renders too, each with the names of the
// targets that do: written, they would change those targets as well.
func ReadByOthers(t Target, all []Target, tree *render.Tree, files []string) map[string][]string {
	out := map[string][]string{}
	for _, o := range all {
		if o.Name == t.Name || !strings.EqualFold(o.Repo, t.Repo) || o.Branch != t.Branch {
			continue
		}
		reads := map[string]bool{}
		for _, f := range tree.ClosureFiles(o.Path) {
			reads[f] = true
		}
		for _, f := range files {
			// A plain directory a reconciler reads whole has no closure.
			if reads[f] || strings.HasPrefix(f, strings.TrimSuffix(o.Path, "/")+"/") && !tree.HasKustomization(o.Path) {
				out[f] = append(out[f], cmp.Or(o.Name, o.Path))
			}
		}
	}
	return out
}
