package charts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"
)

// Helm's media types in a registry (helm.sh/docs/topics/registries).
const (
	helmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	helmChartMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// fetchOCI fetches a chart from a registry: the tag a range resolves to
// among the repository's tags ("+" written "_", as Helm pushes them), or
// the tag or digest given, then the manifest's chart layer, verified
// against its digest. A registry's token service and blob storage may be
// other hosts (the blob is content-addressed); none may be inside the
// network.
func (f *Fetcher) fetchOCI(ctx context.Context, u *url.URL, src Source) (*Chart, error) {
	repoPath := strings.TrimSuffix(u.Host+u.Path, "/")
	if src.Chart != "" {
		repoPath += "/" + src.Chart
	}
	repo, err := name.NewRepository(repoPath)
	if err != nil {
		return nil, fmt.Errorf("registry repository %q: %w", repoPath, err)
	}
	// Every response, the tag list and manifests included, is held to
	// MaxBytes while it is read.
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(&boundedTransport{rt: f.client.Transport, max: f.o.MaxBytes}), remote.WithUserAgent("driftback")}
	if src.Auth != nil {
		opts = append(opts, remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: src.Auth.Username, Password: src.Auth.Password})))
	}
	var ref name.Reference
	version := src.Version
	switch {
	case src.Digest != "":
		ref = repo.Digest(src.Digest)
	case isExactTag(version):
		ref = repo.Tag(strings.ReplaceAll(version, "+", "_"))
	default:
		tags, err := remote.List(repo, opts...)
		if err != nil {
			return nil, fmt.Errorf("listing the tags of %s: %w", repoPath, err)
		}
		versions := make([]string, len(tags))
		for i, t := range tags {
			versions[i] = strings.ReplaceAll(t, "_", "+")
		}
		if version, err = Resolve(versions, version); err != nil {
			return nil, fmt.Errorf("chart %s: %w", repoPath, err)
		}
		ref = repo.Tag(strings.ReplaceAll(version, "+", "_"))
	}
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", ref, err)
	}
	if int64(len(desc.Manifest)) > f.o.MaxBytes {
		return nil, fmt.Errorf("chart %s: its manifest is larger than %d bytes", ref, f.o.MaxBytes)
	}
	var m struct {
		Config struct {
			MediaType string `json:"mediaType"`
		} `json:"config"`
		Layers []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
			Size      int64  `json:"size"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		return nil, fmt.Errorf("chart %s: manifest: %w", ref, err)
	}
	if m.Config.MediaType != helmConfigMediaType {
		return nil, fmt.Errorf("chart %s is not a Helm chart (its config is %q)", ref, m.Config.MediaType)
	}
	for _, l := range m.Layers {
		if l.MediaType != helmChartMediaType {
			continue
		}
		// The digest is this caller's manifest's, read with its
		// credentials: cached under the registry repository and those.
		access := accessKey("oci://"+repo.Name(), src.Auth)
		if c := f.cachedChart(access + l.Digest); c != nil {
			return c, nil
		}
		if l.Size > f.o.MaxBytes {
			return nil, fmt.Errorf("chart %s is %d bytes, more than the %d a chart download may be", ref, l.Size, f.o.MaxBytes)
		}
		layer, err := remote.Layer(repo.Digest(l.Digest), opts...)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", ref, err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", ref, err)
		}
		b, err := f.readBounded(rc, "chart "+ref.String())
		rc.Close()
		if err != nil {
			return nil, err
		}
		if got := digestOf(b); got != l.Digest {
			return nil, fmt.Errorf("chart %s: its layer's digest is %s, not %s", ref, got, l.Digest)
		}
		files, err := load(b)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", ref, err)
		}
		c := &Chart{Name: repo.RepositoryStr()[strings.LastIndex(repo.RepositoryStr(), "/")+1:], Version: chartVersion(files, version), Digest: l.Digest, Files: files}
		f.keep(access+l.Digest, c)
		return c, nil
	}
	return nil, fmt.Errorf("chart %s has no chart layer (%s)", ref, helmChartMediaType)
}

// isExactTag says v names one version, not a range.
func isExactTag(v string) bool {
	if v == "" || v == "*" {
		return false
	}
	if strings.ContainsAny(v, "<>=~^*|, ") || strings.Contains(v, ".x") || strings.Contains(v, ".X") {
		return false
	}
	return true
}

// chartVersion is the version Chart.yaml gives, else the tag's.
func chartVersion(files map[string][]byte, tag string) string {
	var meta struct{ Version string }
	if err := yaml.Unmarshal(files["Chart.yaml"], &meta); err == nil && meta.Version != "" {
		return meta.Version
	}
	return tag
}
