package helm

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// IndexEntry is one version of a chart in a repository's index.yaml.
type IndexEntry struct {
	Version string   `json:"version"`
	URLs    []string `json:"urls"`
	Digest  string   `json:"digest"`
}

// IndexEntries are the versions a repository's index.yaml gives chart;
// nil when it has none. Parsing YAML takes tens of times the memory of
// its bytes: the render package runs this in its sandboxed child.
func IndexEntries(index []byte, chart string) ([]IndexEntry, error) {
	var idx struct {
		Entries map[string][]IndexEntry `json:"entries"`
	}
	if err := yaml.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("index.yaml: %w", err)
	}
	return idx.Entries[chart], nil
}
