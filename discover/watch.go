package discover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Options say what a Watcher reads.
type Options struct {
	// Flux reads Kustomizations and GitRepositories.
	Flux bool
	// ArgoCD reads Applications.
	ArgoCD bool
	// Namespaces are where to look; empty means every namespace.
	Namespaces []string
	// Settings map what is found onto app.yml.
	Settings Settings
	// Recheck is how often kinds that are not served, and Argo CD's
	// settings, are looked at again (zero: one minute).
	Recheck time.Duration
}

// Watcher keeps the targets a cluster's reconcilers imply, following their
// objects as they change.
type Watcher struct {
	dyn    dynamic.Interface
	meta   metadata.Interface
	disc   discovery.DiscoveryInterface
	kube   kubernetes.Interface
	opts   Options
	change chan struct{}

	mu        sync.Mutex
	informers map[schema.GroupVersionResource][]cache.SharedIndexInformer
	errs      map[schema.GroupVersionResource]string
	missing   []string
	// unreadable says discovery itself failed (not a 404): the cluster
	// cannot say what is installed, so nothing is known yet.
	unreadable bool
	found      []*Found
	settings   Settings
	synced     bool
	// leftOut counts the reconciler objects in namespaces not read;
	// leftOutErr says why that is unknown.
	leftOut    []LeftOut
	leftOutErr string
	// controllers are the controllers' states by reconciler (nil:
	// unknown), read at controllersAt.
	controllers   map[Reconciler]*Controller
	controllersAt time.Time
}

// NewWatcher returns a Watcher for the cluster cfg reaches.
func NewWatcher(cfg *rest.Config, opts Options) (*Watcher, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if opts.Recheck <= 0 {
		opts.Recheck = time.Minute
	}
	return &Watcher{
		dyn: dyn, meta: meta, disc: kube.Discovery(), kube: kube, opts: opts,
		change:    make(chan struct{}, 1),
		informers: map[schema.GroupVersionResource][]cache.SharedIndexInformer{},
		errs:      map[schema.GroupVersionResource]string{},
		settings:  opts.Settings,
	}, nil
}

// Changed is signalled when the targets may have changed.
func (w *Watcher) Changed() <-chan struct{} { return w.change }

// Found returns what the reconcilers imply now, sorted.
func (w *Watcher) Found() []*Found {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.found
}

// Synced says the first complete read is done.
func (w *Watcher) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced
}

// Problems say what could not be read: a reconciler not installed, a kind
// the credentials may not list.
func (w *Watcher) Problems() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]string{}, w.missing...)
	for gvr, e := range w.errs {
		out = append(out, fmt.Sprintf("%s: %s", gvr.GroupResource(), e))
	}
	sort.Strings(out)
	return out
}

func (w *Watcher) kinds() []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	if w.opts.Flux {
		out = append(out, FluxKustomizations, FluxGitRepositories)
	}
	if w.opts.ArgoCD {
		out = append(out, ArgoCDApplications, ArgoCDAppProjects)
	}
	return out
}

// namespacesOf are the namespaces a kind is read in: AppProjects in Argo
// CD's own, the reconcilers' objects where app.yml says they count.
func (w *Watcher) namespacesOf(gvr schema.GroupVersionResource) []string {
	if gvr == ArgoCDAppProjects {
		return []string{argoNamespace(w.opts.Settings)}
	}
	return w.namespaces()
}

func argoNamespace(s Settings) string {
	if s.ArgoCDNamespace == "" {
		return "argocd"
	}
	return s.ArgoCDNamespace
}

func (w *Watcher) namespaces() []string {
	if len(w.opts.Namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return w.opts.Namespaces
}

// Run follows the reconcilers' objects until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	events := make(chan struct{}, 1)
	notify := func() {
		select {
		case events <- struct{}{}:
		default:
		}
	}
	tick := time.NewTicker(w.opts.Recheck)
	defer tick.Stop()
	for {
		w.start(ctx, notify)
		w.readArgoSettings(ctx)
		w.countLeftOut(ctx)
		w.mu.Lock()
		stale := time.Since(w.controllersAt) >= w.opts.Recheck/2
		w.mu.Unlock()
		if stale {
			w.readControllers(ctx)
		}
		w.rebuild()
		select {
		case <-ctx.Done():
			return
		case <-events:
			// Let a burst of events settle into one rebuild.
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		case <-tick.C:
		}
	}
}

// countLeftOut counts, again, the reconciler objects discovery leaves out.
func (w *Watcher) countLeftOut(ctx context.Context) {
	l, err := countLeftOut(ctx, w.meta, w.opts)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.leftOut, w.leftOutErr = l, ""
	if err != nil && ctx.Err() == nil {
		w.leftOutErr = err.Error()
	}
}

// LeftOut are the reconciler objects in namespaces discovery does not read,
// by kind; why it is unknown, when it is.
func (w *Watcher) LeftOut() ([]LeftOut, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.leftOut), w.leftOutErr
}

// start starts informers for the kinds the apiserver serves and waits for
// them to list once.
func (w *Watcher) start(ctx context.Context, notify func()) {
	var missing []string
	var started []cache.SharedIndexInformer
	unreadable := false
	for _, gvr := range w.kinds() {
		w.mu.Lock()
		running := w.informers[gvr] != nil
		w.mu.Unlock()
		if running {
			continue
		}
		ok, err := served(w.disc, gvr)
		if err != nil {
			unreadable = true
			missing = append(missing, fmt.Sprintf("%s: cannot ask the cluster whether it is served: %v", gvr.GroupResource(), err))
			continue
		}
		if !ok {
			missing = append(missing, fmt.Sprintf("%s is not served by this cluster (is %s installed?)", gvr.GroupResource(), reconcilerOf(gvr)))
			continue
		}
		var infs []cache.SharedIndexInformer
		for _, ns := range w.namespacesOf(gvr) {
			f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(w.dyn, 0, ns, nil)
			inf := f.ForResource(gvr).Informer()
			g := gvr
			_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
				w.mu.Lock()
				w.errs[g] = watchError(err)
				w.mu.Unlock()
				notify()
			}) // only fails once started, and it is not yet
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(any) { notify() },
				UpdateFunc: func(any, any) { notify() },
				DeleteFunc: func(any) { notify() },
			}); err != nil {
				continue
			}
			go inf.RunWithContext(ctx)
			infs = append(infs, inf)
			started = append(started, inf)
		}
		w.mu.Lock()
		w.informers[gvr] = infs
		w.mu.Unlock()
	}
	if len(started) > 0 {
		syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cache.WaitForCacheSync(syncCtx.Done(), hasSynced(started)...)
		cancel()
	}
	w.mu.Lock()
	w.missing, w.unreadable = missing, unreadable
	w.mu.Unlock()
}

func hasSynced(infs []cache.SharedIndexInformer) []cache.InformerSynced {
	var out []cache.InformerSynced
	for _, i := range infs {
		out = append(out, i.HasSynced)
	}
	return out
}

func watchError(err error) string {
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden: driftback's credentials may not list and watch it (see deploy/ for the RBAC discovery needs)"
	default:
		return err.Error()
	}
}

func reconcilerOf(gvr schema.GroupVersionResource) string {
	if gvr == ArgoCDApplications {
		return "Argo CD"
	}
	return "Flux"
}

// served says whether the apiserver serves a kind; an error other than "not
// found" means it could not say.
func served(d discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// readArgoSettings reads argocd-cm for the instance label Argo CD tracks
// with, and argocd-cmd-params-cm for where it reconciles Applications.
func (w *Watcher) readArgoSettings(ctx context.Context) {
	if !w.opts.ArgoCD {
		return
	}
	ns := w.opts.Settings.ArgoCDNamespace
	if ns == "" {
		ns = "argocd"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w.readArgoNamespaces(ctx, ns)
	cm, err := w.kube.CoreV1().ConfigMaps(ns).Get(ctx, "argocd-cm", metav1.GetOptions{})
	if err != nil {
		return // the default label, as Argo CD itself falls back to
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.opts.Settings.ArgoCDInstanceLabel == "" {
		w.settings.ArgoCDInstanceLabel = cm.Data["application.instanceLabelKey"]
	}
	if !w.opts.Settings.ArgoCDEnableHelm {
		w.settings.ArgoCDEnableHelm = strings.Contains(cm.Data["kustomize.buildOptions"], "--enable-helm")
	}
	if w.opts.Settings.ArgoCDResync == 0 {
		w.settings.ArgoCDResync = argoResync(cm.Data["timeout.reconciliation"])
	}
	if w.opts.Settings.ArgoCDTrackingMethod == "" {
		switch m := cm.Data["application.resourceTrackingMethod"]; m {
		case "label", "annotation", "annotation+label":
			w.settings.ArgoCDTrackingMethod = m
		}
	}
}

// argoResync reads argocd-cm's timeout.reconciliation: zero when unset or
// unreadable (Argo CD's default), negative when set to zero (refresh off).
func argoResync(v string) time.Duration {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	switch {
	case err != nil:
		return 0
	case d == 0:
		return -1
	}
	return d
}

// readArgoNamespaces reads which namespaces besides its own Argo CD
// reconciles Applications in (argocd-cmd-params-cm); none when it cannot be
// read, as Argo CD's own default.
func (w *Watcher) readArgoNamespaces(ctx context.Context, ns string) {
	cm, err := w.kube.CoreV1().ConfigMaps(ns).Get(ctx, "argocd-cmd-params-cm", metav1.GetOptions{})
	if err != nil || w.opts.Settings.ArgoCDAppNamespaces != nil {
		return
	}
	var patterns []string
	for _, p := range strings.Split(cm.Data["application.namespaces"], ",") {
		if p = strings.TrimSpace(p); p != "" {
			patterns = append(patterns, p)
		}
	}
	w.mu.Lock()
	w.settings.ArgoCDAppNamespaces = patterns
	w.mu.Unlock()
}

// rebuild derives the targets from the informers' caches and signals a change.
func (w *Watcher) rebuild() {
	w.mu.Lock()
	defer w.mu.Unlock()
	objects := func(gvr schema.GroupVersionResource) []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, inf := range w.informers[gvr] {
			for _, o := range inf.GetStore().List() {
				if u, ok := o.(*unstructured.Unstructured); ok {
					out = append(out, u)
				}
			}
		}
		return out
	}
	// A kind is read once its informers listed, or once listing it failed
	// (forbidden, say): then it is a problem, said, and not a wait forever.
	synced := !w.unreadable
	for gvr, infs := range w.informers {
		ok := true
		for _, i := range infs {
			ok = ok && i.HasSynced()
		}
		if ok {
			delete(w.errs, gvr) // listed since: the error is behind it
		}
		synced = synced && (ok || w.errs[gvr] != "")
	}
	// AppProjects count once read whole; until then no Application does.
	var projects []*unstructured.Unstructured
	if infs := w.informers[ArgoCDAppProjects]; len(infs) > 0 && infs[0].HasSynced() && w.errs[ArgoCDAppProjects] == "" {
		projects = append([]*unstructured.Unstructured{}, objects(ArgoCDAppProjects)...)
	}
	found := Derive(objects(FluxKustomizations), objects(FluxGitRepositories), objects(ArgoCDApplications), projects, w.settings)
	if !sameFound(found, w.found) || synced != w.synced {
		w.found, w.synced = found, synced
		select {
		case w.change <- struct{}{}:
		default:
		}
	}
}

// Derive computes what reconciler objects imply. projects are Argo CD's
// AppProjects; nil when they were not read, and then no Application counts.
func Derive(kustomizations, gitRepositories, applications, projects []*unstructured.Unstructured, s Settings) []*Found {
	if projects != nil {
		s.Projects = map[string]*unstructured.Unstructured{}
		for _, p := range projects {
			s.Projects[p.GetName()] = p
		}
	}
	sources := map[string]*unstructured.Unstructured{}
	for _, r := range gitRepositories {
		sources[r.GetNamespace()+"/"+r.GetName()] = r
	}
	var out []*Found
	for _, ks := range kustomizations {
		out = append(out, FromFlux(ks, sources, s))
	}
	for _, a := range applications {
		out = append(out, FromArgoCD(a, s))
	}
	Sort(out)
	return out
}

// sameFound compares what the targets depend on: the derived fields and a
// Kustomization's spec, not its status or resource version.
func sameFound(a, b []*Found) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if fingerprint(a[i]) != fingerprint(b[i]) {
			return false
		}
	}
	return true
}

func fingerprint(f *Found) string {
	b, _ := json.Marshal(f) // plain data: it always marshals
	var spec []byte
	if f.Flux != nil {
		spec, _ = json.Marshal(f.Flux.Object["spec"])
	}
	return string(b) + "\x00" + string(spec)
}

// List reads the cluster's reconcilers once, for a command that checks a
// configuration: the targets, and what could not be read.
func List(ctx context.Context, cfg *rest.Config, opts Options) ([]*Found, []string, error) {
	w, err := NewWatcher(cfg, opts)
	if err != nil {
		return nil, nil, err
	}
	var problems []string
	list := func(gvr schema.GroupVersionResource) []*unstructured.Unstructured {
		ok, err := served(w.disc, gvr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: cannot ask the cluster whether it is served: %v", gvr.GroupResource(), err))
			return nil
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is not served by this cluster (is %s installed?)", gvr.GroupResource(), reconcilerOf(gvr)))
			return nil
		}
		out := []*unstructured.Unstructured{}
		for _, ns := range w.namespacesOf(gvr) {
			l, err := w.dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %s", gvr.GroupResource(), watchError(err)))
				if gvr == ArgoCDAppProjects {
					return nil // not read: no Application counts
				}
				continue
			}
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
		}
		return out
	}
	var ks, repos, apps, projects []*unstructured.Unstructured
	if opts.Flux {
		ks, repos = list(FluxKustomizations), list(FluxGitRepositories)
	}
	if opts.ArgoCD {
		apps, projects = list(ArgoCDApplications), list(ArgoCDAppProjects)
		w.readArgoSettings(ctx)
	}
	if ctx.Err() != nil {
		return nil, problems, errors.Join(ctx.Err())
	}
	return Derive(ks, repos, apps, projects, w.settings), problems, nil
}
