package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/driftback/driftback/drift"
	"github.com/driftback/driftback/drift/object"
)

// RepoConfigPath is where a repository refines the policy of its targets. It
// is read from the default branch only, never from a pull request's head.
const RepoConfigPath = ".github/driftback.yml"

// repoConfig is .github/driftback.yml: policy for targets app.yml already
// gives this repository. It cannot add a target or name a cluster.
type repoConfig struct {
	// Targets are the repository's targets to refine, by name.
	Targets []repoTarget `yaml:"targets"`
	// Dashboard false turns off the repository's drift dashboard (app.yml's
	// server.driftDashboard).
	Dashboard *bool `yaml:"dashboard"`
}

// RepoDashboard says whether a repository's .github/driftback.yml leaves its
// drift dashboard on; a file that does not parse leaves it as it is (the
// pull requests that change it say what is wrong).
func RepoDashboard(content []byte) bool {
	var rc struct {
		Dashboard *bool `yaml:"dashboard"`
	}
	if err := yaml.Unmarshal(content, &rc); err != nil || rc.Dashboard == nil {
		return true
	}
	return *rc.Dashboard
}

type repoTarget struct {
	// Name is a target name from app.yml (or its path when it has no name).
	Name   string     `yaml:"name"`
	Policy repoPolicy `yaml:"policy"`
}

// repoPolicy holds what a repository may set; unset fields keep app.yml's.
type repoPolicy struct {
	// FailOn replaces app.yml's targets[].policy.failOn.
	FailOn []drift.DangerReason `yaml:"failOn"`
	// AckLabel replaces app.yml's targets[].policy.ackLabel.
	AckLabel string `yaml:"ackLabel"`
	// Drafts replaces app.yml's targets[].policy.drafts.
	Drafts *bool `yaml:"drafts"`
	// Ignore adds to app.yml's targets[].policy.ignore.
	Ignore []object.IgnoreRule `yaml:"ignore"`
	// IgnoreManagers adds to app.yml's targets[].policy.ignoreManagers.
	IgnoreManagers []string `yaml:"ignoreManagers"`
	// Codify replaces app.yml's targets[].policy.codify.
	Codify CodifyMode `yaml:"codify"`
	// QuietPeriod replaces app.yml's targets[].policy.quietPeriod.
	QuietPeriod time.Duration `yaml:"quietPeriod"`
	// AdoptUnmanaged replaces app.yml's targets[].policy.adoptUnmanaged.
	AdoptUnmanaged *bool `yaml:"adoptUnmanaged"`
	// DriftLabels replaces app.yml's targets[].policy.driftLabels.
	DriftLabels []string `yaml:"driftLabels"`
}

var clusterKey = regexp.MustCompile(`(?m)^\s*-?\s*(cluster|clusters|kubeconfig|forkLive)\s*:`)

// Refine applies a repository's .github/driftback.yml to its targets. Problems
// are returned for the pull request to show; the targets are then unchanged.
func Refine(targets []Target, content []byte) ([]Target, error) {
	if loc := clusterKey.FindSubmatchIndex(content); loc != nil {
		line := bytes.Count(content[:loc[0]], []byte("\n")) + 1
		if content[loc[0]] == '\n' {
			line++
		}
		return targets, fmt.Errorf("%s:%d: %q cannot be set by a repository: clusters and fork access are the operator's (app.yml)", RepoConfigPath, line, string(content[loc[2]:loc[3]]))
	}
	var rc repoConfig
	dec := yaml.NewDecoder(bytes.NewReader(content))
	dec.KnownFields(true)
	if err := dec.Decode(&rc); err != nil && !errors.Is(err, io.EOF) {
		return targets, fmt.Errorf("%s: %w", RepoConfigPath, explainYAML(err, content, reflect.TypeOf(rc)))
	}
	out := append([]Target(nil), targets...)
	for _, rt := range rc.Targets {
		i := -1
		for j, t := range out {
			if t.Name == rt.Name {
				i = j
			}
		}
		if i < 0 {
			return targets, fmt.Errorf("%s: target %q is not one app.yml gives this repository", RepoConfigPath, rt.Name)
		}
		p := &out[i].Policy
		for _, d := range rt.Policy.FailOn {
			if !knownDangers[d] {
				return targets, fmt.Errorf("%s: target %q: unknown danger %q", RepoConfigPath, rt.Name, d)
			}
		}
		if rt.Policy.Codify != "" {
			if err := rt.Policy.Codify.validate(); err != nil {
				return targets, fmt.Errorf("%s: target %q: codify: %v", RepoConfigPath, rt.Name, err)
			}
			p.Codify = rt.Policy.Codify
		}
		if rt.Policy.QuietPeriod > 0 {
			p.QuietPeriod = rt.Policy.QuietPeriod
		}
		if rt.Policy.AdoptUnmanaged != nil {
			p.AdoptUnmanaged = *rt.Policy.AdoptUnmanaged
		}
		if rt.Policy.DriftLabels != nil {
			p.DriftLabels = rt.Policy.DriftLabels
		}
		if rt.Policy.FailOn != nil {
			p.FailOn = rt.Policy.FailOn
		}
		if rt.Policy.AckLabel != "" {
			p.AckLabel = rt.Policy.AckLabel
		}
		if rt.Policy.Drafts != nil {
			p.Drafts = *rt.Policy.Drafts
		}
		p.Ignore = append(append([]object.IgnoreRule(nil), p.Ignore...), rt.Policy.Ignore...)
		p.IgnoreManagers = append(append([]string(nil), p.IgnoreManagers...), rt.Policy.IgnoreManagers...)
	}
	return out, nil
}

// CheckRepoConfig checks a repository's .github/driftback.yml as Refine
// reads it: against targets (app.yml's), or, without them (a pull
// request's own CI, where app.yml is not at hand), taking every target name
// it gives as one app.yml gives.
func CheckRepoConfig(content []byte, targets []Target) error {
	if targets == nil {
		var names struct {
			Targets []struct {
				Name string `yaml:"name"`
			} `yaml:"targets"`
		}
		_ = yaml.Unmarshal(content, &names) // Refine says what does not parse
		for _, t := range names.Targets {
			targets = append(targets, Target{Name: t.Name})
		}
	}
	_, err := Refine(targets, content)
	return err
}
