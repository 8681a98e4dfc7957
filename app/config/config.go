// Package app is the GitHub App: it takes webhooks, queues work per pull
// request, reads repositories through a local cache of bare clones, renders and
// compares the overlays a change affects, and keeps one comment and one check
// run per target on the pull request.
// Package config reads driftback's configuration: app.yml (load, defaults,
// environment overrides, validation with the file's line) and a
// repository's .github/driftback.yml, which refines the policy of the
// targets app.yml gives it. It knows neither GitHub clients nor clusters.
package config

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/admission"
	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/drift/scope"
)

// Config is app.yml: the GitHub App manifest and driftback's settings.
type Config struct {
	// consulted are the DRIFTBACK_… variables the overrides read.
	consulted map[string]bool
	// auditTokenInEnv says DRIFTBACK_AUDIT_TOKEN is set: the audit
	// endpoint's token need not be in a file.
	auditTokenInEnv bool
	// Manifest is the GitHub App manifest `driftback register` submits.
	Manifest Manifest     `yaml:"manifest"`
	GitHub   GitHub       `yaml:"github"`
	Server   ServerConfig `yaml:"server"`
	// Clusters are named connections targets refer to.
	Clusters map[string]Cluster `yaml:"clusters"`
	Targets  []Target           `yaml:"targets"`
	// Helm says where charts may be fetched from.
	Helm Helm `yaml:"helm"`
	// Audit reads the clusters' audit events: who made each drift.
	Audit Audit `yaml:"audit"`
}

// Manifest is the GitHub App manifest (docs.github.com: "Registering a GitHub
// App from a manifest").
type Manifest struct {
	// Name is the App's name on GitHub (unique on GitHub; its bot user is
	// the name's slug plus "[bot]").
	Name string `yaml:"name" json:"name"`
	// URL is the App's homepage.
	URL string `yaml:"url" json:"url"`
	// Description is shown on the App's page.
	Description string `yaml:"description" json:"description,omitempty"`
	// HookAttributes says where GitHub delivers webhooks.
	HookAttributes HookAttributes `yaml:"hook_attributes" json:"hook_attributes"`
	// RedirectURL is where GitHub sends the browser back after creating the
	// App; used only when it points at `driftback register`'s own page.
	RedirectURL string `yaml:"redirect_url" json:"redirect_url,omitempty"`
	// Public lets other accounts install the App (default false).
	Public bool `yaml:"public" json:"public"`
	// DefaultPermissions are the repository permissions the App asks for
	// (contents, pull_requests, checks and issues write; metadata read).
	DefaultPermissions map[string]string `yaml:"default_permissions" json:"default_permissions"`
	// DefaultEvents are the webhook events the App subscribes to
	// (pull_request, issue_comment, issues, check_run, push).
	DefaultEvents []string `yaml:"default_events" json:"default_events"`
}

// HookAttributes says where GitHub delivers webhooks.
type HookAttributes struct {
	// URL is the webhook address: https://YOUR-HOST/webhook.
	URL string `yaml:"url" json:"url"`
	// Active turns the webhook on (default true: an App without it hears
	// nothing).
	Active *bool `yaml:"active" json:"active"`
}

// GitHub holds how driftback authenticates. The private key and the webhook
// secret are never written in app.yml: they come from files or the environment.
type GitHub struct {
	// AppID is the GitHub App's ID.
	AppID int64 `yaml:"appID"`
	// PrivateKeyFile holds the App's PEM private key; DRIFTBACK_GITHUB_PRIVATE_KEY
	// (the PEM itself) takes precedence.
	PrivateKeyFile string `yaml:"privateKeyFile"`
	// WebhookSecretFile holds the webhook secret; DRIFTBACK_GITHUB_WEBHOOK_SECRET
	// takes precedence.
	WebhookSecretFile string `yaml:"webhookSecretFile"`
	// APIURL is the REST API base: https://api.github.com/ (the default), or
	// https://HOST/api/v3/ for GitHub Enterprise Server.
	APIURL string `yaml:"apiURL"`
	// WebURL is the GitHub web address `driftback register` sends the
	// manifest to: https://github.com/ (the default), derived from APIURL
	// (https://HOST/api/v3/ gives https://HOST/).
	WebURL string `yaml:"webURL"`
	// Pace bounds the content-creating requests (comments, check runs, pull
	// requests, issues, labels) of each installation: in any minute and any
	// hour (defaults 80 and 500, GitHub's published secondary rate limits;
	// negative: no pacing).
	Pace Pace `yaml:"pace"`
}

// Pace is a rate of content-creating requests to GitHub.
type Pace struct {
	// PerMinute bounds the writes of an installation in any minute (default 80).
	PerMinute int `yaml:"perMinute"`
	// PerHour bounds them in any hour (default 500).
	PerHour int `yaml:"perHour"`
}

// ServerConfig configures the HTTP server and the work queue.
type ServerConfig struct {
	// Listen is the address of the webhook, health and metrics server (default ":8080").
	Listen string `yaml:"listen"`
	// Workers is how many pull requests are processed at once (default 4).
	Workers int `yaml:"workers"`
	// QueueSize bounds the pull requests waiting (default 256); past it
	// deliveries get 503 and GitHub's redelivery can retry them.
	QueueSize int `yaml:"queueSize"`
	// CacheDir holds the bare clones of repositories (default a temporary folder).
	CacheDir string `yaml:"cacheDir"`
	// CacheMaxBytes bounds the clones on disk (default 4 GiB), what fetches
	// under way download included; the least recently used repositories are
	// removed first. Leave the volume some room above it for the indexes git
	// writes beside what it downloads.
	CacheMaxBytes int64 `yaml:"cacheMaxBytes"`
	// FetchTimeout bounds one fetch of a repository (default 2m): every job
	// on the repository waits while its clone is fetched into.
	FetchTimeout time.Duration `yaml:"fetchTimeout"`
	// JobTimeout bounds the work on one pull request (default 5m).
	JobTimeout time.Duration `yaml:"jobTimeout"`
	// DriftInterval is how often the drift loop looks at every target even
	// when nothing it watches changed (default 5m); watch events and pushes
	// to the default branch wake it sooner.
	DriftInterval time.Duration `yaml:"driftInterval"`
	// DriftDashboard keeps one issue per repository, "driftback: drift
	// dashboard", that shows what differs from Git now across its targets,
	// with boxes to act on it (default true). A repository can turn it off
	// in .github/driftback.yml (dashboard: false). Off, codify: report
	// targets keep one issue per target instead.
	DriftDashboard *bool `yaml:"driftDashboard"`
	// LeaderElection chooses the one replica that runs the drift loop.
	LeaderElection LeaderElection `yaml:"leaderElection"`
	// MaxUnverifiedBytes bounds the webhook bodies held at once before their
	// signature is checked (default 64 MiB, well under deploy/'s 3 GiB);
	// past it deliveries get 503 with Retry-After.
	MaxUnverifiedBytes int64 `yaml:"maxUnverifiedBytes"`
	// ReadTimeout bounds reading one request, body included (default 20s):
	// a slow sender cannot hold a body's budget for longer.
	ReadTimeout time.Duration `yaml:"readTimeout"`
}

// Cluster is how to reach one cluster, read-only by default.
type Cluster struct {
	// Kubeconfig is a kubeconfig file; empty with InCluster false means the
	// default loading rules (KUBECONFIG, ~/.kube/config).
	Kubeconfig string `yaml:"kubeconfig"`
	// Context picks a kubeconfig context.
	Context string `yaml:"context"`
	// InCluster uses the pod's service account.
	InCluster bool `yaml:"inCluster"`
	// Mode is read-only (default) or dry-run, which needs patch: write access.
	Mode drift.Mode `yaml:"mode"`
	// QPS is the client's sustained request rate to this cluster; 0 means
	// livestate.DefaultQPS (50), a negative value no client-side limit.
	QPS float32 `yaml:"qps"`
	// Burst is how many requests may go at once above QPS; 0 means
	// livestate.DefaultBurst (300).
	Burst int `yaml:"burst"`
	// Discover derives targets from the reconcilers running in this
	// cluster: Flux Kustomizations and Argo CD Applications.
	Discover *Discover `yaml:"discover"`
	// PodSecurity is the cluster's PodSecurity admission configuration,
	// which the cluster does not serve (kube-apiserver's admission
	// configuration file): the levels of namespaces without labels, and
	// what is exempt. Absent: Kubernetes' defaults (privileged).
	PodSecurity *PodSecurity `yaml:"podSecurity"`
}

// PodSecurity is kube-apiserver's PodSecurityConfiguration, as it writes
// it.
type PodSecurity struct {
	// Defaults by mode: enforce, enforce-version, audit, audit-version,
	// warn, warn-version.
	Defaults map[string]string `yaml:"defaults"`
	// Exemptions are never checked, as the plugin exempts them.
	Exemptions PodSecurityExemptions `yaml:"exemptions"`
}

// PodSecurityExemptions are what the PodSecurity plugin does not check.
type PodSecurityExemptions struct {
	// Usernames are users whose requests are exempt (a controller that
	// creates pods: system:serviceaccount:kube-system:replicaset-controller).
	Usernames []string `yaml:"usernames"`
	// RuntimeClasses are the runtime classes whose pods are exempt.
	RuntimeClasses []string `yaml:"runtimeClasses"`
	// Namespaces are the namespaces whose pods are exempt.
	Namespaces []string `yaml:"namespaces"`
}

// Admission is the configuration as the admission checks read it.
func (p *PodSecurity) Admission() (admission.PodSecurity, error) {
	if p == nil {
		return admission.PodSecurity{}, nil
	}
	return admission.ParsePodSecurity(p.Defaults, p.Exemptions.Namespaces, p.Exemptions.RuntimeClasses, p.Exemptions.Usernames)
}

// Target is one overlay of one repository deployed to one cluster, as
// app.yml names it.
type Target struct {
	// Name names the target on the pull request (default: the path).
	Name string `yaml:"name"`
	// Repo is owner/name.
	Repo string `yaml:"repo"`
	// Path is the overlay directory in the repository.
	Path string `yaml:"path"`
	// Cluster is a key of clusters.
	Cluster string `yaml:"cluster"`
	// Tracking finds the live objects the reconciler owns, for prune.
	Tracking drift.Tracking `yaml:"tracking"`
	// Policy is what counts as failure and how forks and drafts are treated.
	Policy Policy `yaml:"policy"`
	// Branch is the branch whose merges the reconciler applies (default:
	// the repository's default branch); pull requests to other branches do
	// not affect the target.
	Branch string `yaml:"branch"`
	// Scope widens what a pull request may read from the cluster for this
	// target. A pull request always reads what the default branch's render
	// of the target holds (its namespaces and cluster-scoped kinds); objects
	// it renders elsewhere are compared in Git only.
	Scope TargetScope `yaml:"scope"`
}

// TargetScope widens a target's scope; "*" allows every namespace or kind.
type TargetScope struct {
	// Namespaces whose live objects a pull request may read.
	Namespaces []string `yaml:"namespaces"`
	// ClusterKinds are cluster-scoped kinds, "Kind.group" (or "Kind" for the
	// core group), whose live objects a pull request may read.
	ClusterKinds []string `yaml:"clusterKinds"`
}

// Policy tunes a target; a repository can refine it in .github/driftback.yml.
type Policy struct {
	// FailOn lists danger reasons that fail the check run.
	FailOn []drift.DangerReason `yaml:"failOn"`
	// AckLabel is the pull-request label that acknowledges the dangers and lets
	// the check pass (default "driftback/allow-danger").
	AckLabel string `yaml:"ackLabel"`
	// Drafts: also process draft pull requests (default false).
	Drafts bool `yaml:"drafts"`
	// ForkLive: show live cluster data on pull requests from forks without a
	// writer's "/driftback diff <commit>" (default false: render diff only).
	ForkLive bool `yaml:"forkLive"`
	// Ignore leaves fields out of the diff.
	Ignore []object.IgnoreRule `yaml:"ignore"`
	// IgnoreManagers adds to the default list of ignored field managers:
	// controllers whose writes are never a person's drift.
	IgnoreManagers []string `yaml:"ignoreManagers"`
	// Codify is what the drift loop does with live changes that stay: manual
	// (default) proposes every one in a pull request, annotated only those on
	// objects carrying driftback.io/intent, report keeps one issue per target
	// instead of a pull request, off does nothing.
	Codify CodifyMode `yaml:"codify"`
	// QuietPeriod is how long a live change must stay before it is proposed
	// (default 2m); a change reverted sooner is never proposed.
	QuietPeriod time.Duration `yaml:"quietPeriod"`
	// AdoptUnmanaged writes objects a person created in the target's
	// namespaces into the overlay (default false: they are only listed).
	AdoptUnmanaged bool `yaml:"adoptUnmanaged"`
	// FightWindow is how recent a field's changes of hands count: one that
	// went back and forth between the same two field managers three times
	// within it is a fight, reported, never proposed (default 1h).
	FightWindow time.Duration `yaml:"fightWindow"`
	// DriftLabels label drift pull requests and issues (default
	// ["driftback/drift"]).
	DriftLabels []string `yaml:"driftLabels"`
}

// CodifyMode is a target's drift policy.
type CodifyMode string

// Drift policies.
const (
	CodifyManual    CodifyMode = "manual"
	CodifyAnnotated CodifyMode = "annotated"
	CodifyReport    CodifyMode = "report"
	CodifyOff       CodifyMode = "off"
)

// IntentAnnotation on a live object says why a person changed it; with
// codify: annotated only such objects are proposed, and the pull request
// quotes it.
const IntentAnnotation = "driftback.io/intent"

// DefaultFightWindow is how recent the changes of a fight are.
const DefaultFightWindow = time.Hour

// Dashboard says the drift dashboard is on, as app.yml sets it.
func (s ServerConfig) Dashboard() bool { return s.DriftDashboard == nil || *s.DriftDashboard }

// DefaultQuietPeriod is how long a live change must stay to be proposed.
const DefaultQuietPeriod = 2 * time.Minute

// Secrets are the credentials that never appear in app.yml or a log.
type Secrets struct {
	PrivateKey    []byte
	WebhookSecret []byte
	// AuditToken authenticates the audit webhook endpoint (audit.tokenFile).
	AuditToken []byte
	// From says where each came from, for the start-up log.
	From map[string]string
}

// DefaultAckLabel acknowledges dangers on a pull request.
const DefaultAckLabel = "driftback/allow-danger"

// LoadConfig reads app.yml strictly (an unknown key or a wrong type is an error
// with its line), applies DRIFTBACK_… environment overrides and defaults, and
// validates the result.
func LoadConfig(path string, env func(string) string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(b, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

var inlineSecret = regexp.MustCompile(`(?m)^\s+(privateKey|webhookSecret|private_key|webhook_secret)\s*:`)

// ParseConfig parses app.yml content; see LoadConfig.
func ParseConfig(b []byte, env func(string) string) (*Config, error) {
	if loc := inlineSecret.FindIndex(b); loc != nil {
		line := bytes.Count(b[:loc[0]], []byte("\n")) + 1
		return nil, fmt.Errorf("line %d: secrets are never written in app.yml: use github.privateKeyFile and github.webhookSecretFile, or DRIFTBACK_GITHUB_PRIVATE_KEY and DRIFTBACK_GITHUB_WEBHOOK_SECRET", line)
	}
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, explainYAML(err, b, reflect.TypeFor[Config]())
	}
	if env != nil {
		// What the overrides asked for: an environment variable of the
		// same prefix that none read is named (UnknownEnv).
		cfg.consulted = map[string]bool{}
		seen := func(name string) string {
			cfg.consulted[name] = true
			return env(name)
		}
		if err := applyEnv(reflect.ValueOf(&cfg).Elem(), "DRIFTBACK", seen); err != nil {
			return nil, err
		}
		cfg.auditTokenInEnv = strings.TrimSpace(env("DRIFTBACK_AUDIT_TOKEN")) != ""
	}
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, withLines(err, b)
	}
	return &cfg, nil
}

func (c *Config) defaults() {
	if c.GitHub.APIURL == "" {
		c.GitHub.APIURL = "https://api.github.com/"
	}
	if !strings.HasSuffix(c.GitHub.APIURL, "/") {
		c.GitHub.APIURL += "/"
	}
	if c.GitHub.WebURL == "" {
		c.GitHub.WebURL = WebURLFor(c.GitHub.APIURL)
	} else if !strings.HasSuffix(c.GitHub.WebURL, "/") {
		c.GitHub.WebURL += "/"
	}
	if c.Manifest.HookAttributes.Active == nil {
		on := true
		c.Manifest.HookAttributes.Active = &on
	}
	if c.Server.Listen == "" {
		c.Server.Listen = ":8080"
	}
	if c.Server.Workers <= 0 {
		c.Server.Workers = 4
	}
	if c.Server.QueueSize <= 0 {
		c.Server.QueueSize = 256
	}
	if c.Server.CacheMaxBytes <= 0 {
		c.Server.CacheMaxBytes = 4 << 30
	}
	if c.Server.JobTimeout <= 0 {
		c.Server.JobTimeout = 5 * time.Minute
	}
	if c.Server.FetchTimeout <= 0 {
		c.Server.FetchTimeout = 2 * time.Minute
	}
	if c.Server.MaxUnverifiedBytes <= 0 {
		c.Server.MaxUnverifiedBytes = DefaultMaxUnverified
	}
	if c.Server.ReadTimeout <= 0 {
		c.Server.ReadTimeout = 20 * time.Second
	}
	if c.Server.DriftInterval <= 0 {
		c.Server.DriftInterval = 5 * time.Minute
	}
	c.Server.LeaderElection.defaults(os.Getenv)
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.Name == "" {
			t.Name = t.Path
		}
		if t.Policy.AckLabel == "" {
			t.Policy.AckLabel = DefaultAckLabel
		}
		t.Policy.DriftDefaults()
	}
	for name, cl := range c.Clusters {
		if cl.Mode == "" {
			cl.Mode = drift.ModeReadOnly
			c.Clusters[name] = cl
		}
	}
}

// DriftDefaults fills the drift loop's settings a policy leaves unset.
func (p *Policy) DriftDefaults() {
	if p.Codify == "" {
		p.Codify = CodifyManual
	}
	if p.QuietPeriod <= 0 {
		p.QuietPeriod = DefaultQuietPeriod
	}
	if p.FightWindow <= 0 {
		p.FightWindow = DefaultFightWindow
	}
	if p.DriftLabels == nil {
		p.DriftLabels = []string{"driftback/drift"}
	}
}

func (m CodifyMode) validate() error {
	switch m {
	case CodifyManual, CodifyAnnotated, CodifyReport, CodifyOff:
		return nil
	}
	return fmt.Errorf("%q is not one of manual, annotated, report, off", m)
}

var knownDangers = map[drift.DangerReason]bool{
	drift.DangerCRDRemoval: true, drift.DangerNamespaceRemoval: true, drift.DangerPVCRemoval: true,
	drift.DangerPVRemoval: true, drift.DangerStatefulSetPVC: true, drift.DangerImmutableField: true,
	drift.DangerRBACEscalation: true, drift.DangerAutoscaledReplicas: true,
	drift.DangerRestoreNotRollback: true, drift.DangerRollbackAcrossJob: true, drift.DangerSyncFails: true,
	drift.DangerAdmissionRefused: true, drift.DangerPodsRefused: true, drift.DangerAdmissionWarning: true,
}

// KnownDangers are the danger reasons a policy may fail on, sorted.
func KnownDangers() []drift.DangerReason {
	out := slices.Collect(maps.Keys(knownDangers))
	slices.Sort(out)
	return out
}

func (c *Config) validate() error {
	errs := append(c.Helm.validate(), c.Audit.validate(c.Clusters, c.auditTokenInEnv)...)
	for name, cl := range c.Clusters {
		if cl.Mode != drift.ModeReadOnly && cl.Mode != drift.ModeDryRun {
			errs = append(errs, fmt.Sprintf("clusters.%s.mode: %q is neither read-only nor dry-run", name, cl.Mode))
		}
		if _, err := cl.PodSecurity.Admission(); err != nil {
			errs = append(errs, fmt.Sprintf("clusters.%s.podSecurity.%v", name, err))
		}
		if cl.InCluster && cl.Kubeconfig != "" {
			errs = append(errs, fmt.Sprintf("clusters.%s: inCluster and kubeconfig exclude each other", name))
		}
		if cl.Burst < 0 {
			errs = append(errs, fmt.Sprintf("clusters.%s.burst: %d is negative", name, cl.Burst))
		}
		if d := cl.Discover; d != nil {
			if !d.Flux && !d.ArgoCD {
				errs = append(errs, fmt.Sprintf("clusters.%s.discover: neither flux nor argocd is true", name))
			}
			if d.FluxSubstitution != "" && d.FluxSubstitution != "strict" && d.FluxSubstitution != "lenient" {
				errs = append(errs, fmt.Sprintf("clusters.%s.discover.fluxSubstitution: %q is neither strict nor lenient", name, d.FluxSubstitution))
			}
			for dest, to := range d.Destinations {
				if _, ok := c.Clusters[to]; !ok {
					errs = append(errs, fmt.Sprintf("clusters.%s.discover.destinations[%q]: %q is not one of clusters", name, dest, to))
				}
			}
			for _, n := range d.Namespaces {
				if n == "" {
					errs = append(errs, fmt.Sprintf("clusters.%s.discover.namespaces: an empty namespace", name))
				}
				if n == "*" && len(d.Namespaces) > 1 {
					errs = append(errs, fmt.Sprintf("clusters.%s.discover.namespaces: \"*\" is every namespace, alone", name))
				}
			}
			for ns, patterns := range d.Repositories {
				for _, p := range patterns {
					if _, err := path.Match(p, ""); err != nil {
						errs = append(errs, fmt.Sprintf("clusters.%s.discover.repositories[%q]: %q: %v", name, ns, p, err))
					}
				}
			}
		}
	}
	if le := c.Server.LeaderElection.Cluster; le != "" {
		if _, ok := c.Clusters[le]; !ok {
			errs = append(errs, fmt.Sprintf("server.leaderElection.cluster: %q is not one of clusters", le))
		}
	}
	slugs := map[string]string{}
	seen := map[string]bool{}
	for i, t := range c.Targets {
		where := fmt.Sprintf("targets[%d]", i)
		if t.Repo == "" || strings.Count(t.Repo, "/") != 1 {
			errs = append(errs, fmt.Sprintf("%s.repo: %q is not owner/name", where, t.Repo))
		}
		if t.Path == "" {
			errs = append(errs, where+".path: missing")
		} else if _, err := path.Match(t.Path, ""); err != nil {
			errs = append(errs, fmt.Sprintf("%s.path: %q is not a valid pattern: %v", where, t.Path, err))
		}
		if t.Cluster != "" {
			if _, ok := c.Clusters[t.Cluster]; !ok {
				errs = append(errs, fmt.Sprintf("%s.cluster: %q is not one of clusters", where, t.Cluster))
			}
		}
		for _, d := range t.Policy.FailOn {
			if !knownDangers[d] {
				errs = append(errs, fmt.Sprintf("%s.policy.failOn: unknown danger %q", where, d))
			}
		}
		if err := t.Policy.Codify.validate(); err != nil {
			errs = append(errs, fmt.Sprintf("%s.policy.codify: %v", where, err))
		}
		for _, k := range t.Scope.ClusterKinds {
			if _, err := scope.ParseKind(k); err != nil {
				errs = append(errs, fmt.Sprintf("%s.scope.clusterKinds: %v", where, err))
			}
		}
		for _, n := range t.Scope.Namespaces {
			if n == "" {
				errs = append(errs, where+".scope.namespaces: an empty namespace")
			}
		}
		branch := strings.ToLower(t.Repo) + " " + Slug(t.Name)
		if other, ok := slugs[branch]; ok && other != t.Name {
			errs = append(errs, fmt.Sprintf("%s: %q and %q would share the drift branch %s%s; rename one", where, other, t.Name, DriftBranchPrefix, Slug(t.Name)))
		}
		slugs[branch] = t.Name
		key := strings.ToLower(t.Repo) + " " + t.Name
		if seen[key] {
			errs = append(errs, fmt.Sprintf("%s: a second target named %q in %s", where, t.Name, t.Repo))
		}
		seen[key] = true
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// otherEnv are the DRIFTBACK_… variables read elsewhere than app.yml's
// overrides: the secrets, and what the render child and the Action read.
var otherEnv = []string{"DRIFTBACK_GITHUB_PRIVATE_KEY", "DRIFTBACK_GITHUB_WEBHOOK_SECRET", "DRIFTBACK_AUDIT_TOKEN", "DRIFTBACK_MEMORY_LIMIT",
	"DRIFTBACK_RENDER_CHILD", "DRIFTBACK_RENDER_MEMORY", "DRIFTBACK_RENDER_CPU", "DRIFTBACK_RENDER_CPU_TOTAL", "DRIFTBACK_BIN", "DRIFTBACK_RELEASES_URL"}

// UnknownEnv names, of environ (KEY=value lines), the DRIFTBACK_… variables
// nothing reads: a misspelled override is otherwise ignored without a
// word. Each says the name it most likely meant. Only a configuration
// parsed with an environment knows what it read.
func (c *Config) UnknownEnv(environ []string) []string {
	if c.consulted == nil {
		return nil
	}
	known := append([]string(nil), otherEnv...)
	for name := range c.consulted {
		known = append(known, name)
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "DRIFTBACK_") || c.consulted[name] || slices.Contains(otherEnv, name) || strings.HasPrefix(name, "DRIFTBACK_TEST_") {
			continue
		}
		msg := name + " is not a setting driftback reads: it is ignored"
		if s := DidYouMean(name, known); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		out = append(out, msg)
	}
	sort.Strings(out)
	return out
}

// LoadSecrets reads the private key and webhook secret from the environment or
// the files app.yml names, and checks what serving as the App needs: its
// ID, a private key GitHub can check a token of, a webhook secret.
func (c *Config) LoadSecrets(env func(string) string) (*Secrets, error) {
	if c.GitHub.AppID <= 0 {
		return nil, errors.New("github.appID: not set: the GitHub App's ID (its settings page, \"App ID\"), in app.yml or DRIFTBACK_GITHUB_APP_ID; `driftback register` writes it")
	}
	s := &Secrets{From: map[string]string{}}
	read := func(name, envName, file string) ([]byte, error) {
		if v := env(envName); v != "" {
			s.From[name] = "environment " + envName
			return []byte(v), nil
		}
		if file == "" {
			return nil, fmt.Errorf("%s: set %s or github.%sFile", name, envName, name)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("github.%sFile %s: %v (or set %s)", name, file, err, envName)
		}
		s.From[name] = "file " + file
		return bytes.TrimSpace(b), nil
	}
	var err error
	if s.PrivateKey, err = read("privateKey", "DRIFTBACK_GITHUB_PRIVATE_KEY", c.GitHub.PrivateKeyFile); err != nil {
		return nil, err
	}
	if err := privateKey(s.PrivateKey); err != nil {
		return nil, fmt.Errorf("privateKey (%s): %w", s.From["privateKey"], err)
	}
	if s.WebhookSecret, err = read("webhookSecret", "DRIFTBACK_GITHUB_WEBHOOK_SECRET", c.GitHub.WebhookSecretFile); err != nil {
		return nil, err
	}
	if len(s.WebhookSecret) == 0 {
		return nil, errors.New("webhookSecret: empty; anyone could sign deliveries with an empty secret")
	}
	if s.AuditToken, err = c.Audit.AuditToken(env); err != nil {
		return nil, err
	}
	return s, nil
}

// applyEnv overrides every scalar of v from DRIFTBACK_… variables named by its
// YAML path: github.appID is DRIFTBACK_GITHUB_APP_ID, clusters.prod.context is
// DRIFTBACK_CLUSTERS_PROD_CONTEXT, targets[0].path is DRIFTBACK_TARGETS_0_PATH.
func applyEnv(v reflect.Value, prefix string, env func(string) string) error {
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			if err := applyEnv(v.Field(i), prefix+"_"+envName(tag), env); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return nil
		}
		for _, k := range v.MapKeys() {
			elem := reflect.New(v.Type().Elem()).Elem()
			elem.Set(v.MapIndex(k))
			if err := applyEnv(elem, prefix+"_"+envName(k.String()), env); err != nil {
				return err
			}
			v.SetMapIndex(k, elem)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			for i := 0; i < v.Len(); i++ {
				if err := applyEnv(v.Index(i), prefix+"_"+strconv.Itoa(i), env); err != nil {
					return err
				}
			}
			return nil
		}
		if s := env(prefix); s != "" {
			parts := strings.Split(s, ",")
			out := reflect.MakeSlice(v.Type(), 0, len(parts))
			for _, p := range parts {
				e := reflect.New(v.Type().Elem()).Elem()
				if err := setScalar(e, strings.TrimSpace(p), prefix); err != nil {
					return err
				}
				out = reflect.Append(out, e)
			}
			v.Set(out)
		}
	default:
		if s := env(prefix); s != "" {
			return setScalar(v, s, prefix)
		}
	}
	return nil
}

func setScalar(v reflect.Value, s, name string) error {
	if v.Type() == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", name, s)
		}
		v.SetInt(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a number", name, s)
		}
		v.SetFloat(f)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%s: %q is not true or false", name, s)
		}
		v.SetBool(b)
	default:
		return fmt.Errorf("%s: cannot be set from the environment", name)
	}
	return nil
}

var camel = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// envName turns a YAML key into an environment name part: appID → APP_ID.
func envName(key string) string {
	s := camel.ReplaceAllString(key, "${1}_${2}")
	s = strings.NewReplacer("-", "_", ".", "_", "/", "_").Replace(s)
	return strings.ToUpper(s)
}

// Redacted describes the effective configuration for the start-up log: every
// setting, and for the secrets only where they came from.
func (c *Config) Redacted(s *Secrets) map[string]any {
	out := map[string]any{
		"github.appID":          c.GitHub.AppID,
		"github.apiURL":         c.GitHub.APIURL,
		"server.listen":         c.Server.Listen,
		"server.workers":        c.Server.Workers,
		"server.queueSize":      c.Server.QueueSize,
		"server.cacheDir":       c.Server.CacheDir,
		"server.jobTimeout":     c.Server.JobTimeout.String(),
		"server.fetchTimeout":   c.Server.FetchTimeout.String(),
		"server.driftInterval":  c.Server.DriftInterval.String(),
		"server.driftDashboard": fmt.Sprint(c.Server.Dashboard()),
		"clusters":              len(c.Clusters),
		"targets":               len(c.Targets),
		"github.privateKey":     "(redacted)",
		"github.webhookSecret":  "(redacted)",
		"audit.listen":          c.Audit.Listen,
		"audit.file":            c.Audit.File,
	}
	if s != nil {
		out["github.privateKey"] = "(redacted, from " + s.From["privateKey"] + ")"
		out["github.webhookSecret"] = "(redacted, from " + s.From["webhookSecret"] + ")"
	}
	return out
}

// privateKey checks that b is an RSA private key in PEM, as GitHub issues
// an App's: what it is otherwise, never its content.
func privateKey(b []byte) error {
	block, _ := pem.Decode(b)
	if block == nil {
		return errors.New("not a PEM key: give the .pem file GitHub's App settings page generates")
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("a PEM block of type %q that is not a private key", block.Type)
	}
	if _, ok := k.(*rsa.PrivateKey); !ok {
		return fmt.Errorf("a %T, not the RSA key GitHub issues", k)
	}
	return nil
}
