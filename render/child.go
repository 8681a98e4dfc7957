package render

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/driftback/driftback/render/child"
	"github.com/driftback/driftback/render/helm"
)

// ServeChild turns the process into a render child when it was started as
// one, and never returns in that case: every request, Helm's included. Call
// it first thing in main, and in TestMain of any test binary that renders.
func ServeChild() {
	child.Serve(&child.Helm{Serve: serveHelm, Inflate: inflate})
}

// helmRequest is a child.Request's Helm: a chart to render, or a
// repository's index.yaml, parsed for IndexChart's versions.
type helmRequest struct {
	Chart      *Chart
	Index      []byte
	IndexChart string
}

// helmReply answers a helmRequest: Chart a chart, Index an index.
type helmReply struct {
	Chart *chartReply
	Index *indexReply
}

// serveHelm answers a helmRequest, in the child; nil, which the parent
// takes for a child that gave no answer, when it cannot.
func serveHelm(b []byte, maxOutput int64) []byte {
	var req helmRequest
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&req); err != nil {
		return nil
	}
	var rep helmReply
	if req.Chart != nil {
		chart := renderChart(req.Chart, maxOutput)
		rep.Chart = &chart
	} else {
		index := chartIndex(&req)
		rep.Index = &index
	}
	out, err := encode(rep)
	if err != nil {
		return nil
	}
	return out
}

// inflate inflates an overlay's helmCharts, in the child.
func inflate(fs filesys.FileSystem, dir string, b BuildOptions) *Problem {
	err := helm.Inflate(context.Background(), fs, dir, helm.InflateOptions{KubeVersion: b.HelmKubeVersion, APIVersions: b.HelmAPIVersions})
	if err == nil {
		return nil
	}
	p := &Problem{Reason: ReasonHelm, Message: err.Error()}
	if ie := (*helm.InflateError)(nil); errors.As(err, &ie) {
		p.File, p.Message = ie.File, ie.Message
	}
	return p
}

// encode is v as gob: what the parent and the child send each other.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
