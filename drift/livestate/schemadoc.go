package livestate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	jsoniter "github.com/json-iterator/go"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// schemaDoc is one OpenAPI v3 document's schemas, kept as served and parsed
// when a comparison first reaches them. A document holds every kind of its
// group-version (and, in `apps/v1`, much of the core group's types), most of
// which a comparison never reaches; its paths, two thirds of its bytes, are
// skipped without being parsed.
type schemaDoc struct {
	raw map[string][]byte // schema name → its JSON
	// kinds names the schema of each kind the document declares.
	kinds  map[schema.GroupVersionKind]string
	parsed map[string]*spec.Schema // the schemas parsed so far
	at     time.Time
}

// refPrefix starts the reference of a schema of the same document.
const refPrefix = "#/components/schemas/"

// gvkExtension is the extension by which a schema declares its kinds.
const gvkExtension = "x-kubernetes-group-version-kind"

// splitSchemas reads a document's component schemas, each kept as its
// JSON, and the kinds they declare.
func splitSchemas(b []byte) (*schemaDoc, error) {
	d := &schemaDoc{raw: map[string][]byte{}, kinds: map[schema.GroupVersionKind]string{}, parsed: map[string]*spec.Schema{}}
	// The document is split, not decoded: each schema is parsed (and so
	// checked) when it is reached.
	it := jsoniter.ConfigDefault.BorrowIterator(nil)
	defer jsoniter.ConfigDefault.ReturnIterator(it)
	field := func(want string, then func(*jsoniter.Iterator) bool) func(*jsoniter.Iterator, string) bool {
		return func(it *jsoniter.Iterator, f string) bool {
			if f != want {
				it.Skip()
				return true
			}
			return then(it)
		}
	}
	components := func(it *jsoniter.Iterator) bool {
		return it.ReadObjectCB(field("schemas", func(it *jsoniter.Iterator) bool {
			return it.ReadObjectCB(func(it *jsoniter.Iterator, name string) bool {
				d.raw[name] = slices.Clone(it.SkipAndReturnBytes())
				return true
			})
		}))
	}
	// The apiserver writes the paths first, and they are most of the
	// document: its components are read alone when the first key so
	// named holds a value that ends the document (a quote in a string is
	// escaped, so only a key reads `"components":`).
	if value, ok := lastValue(b, `"components":`); ok {
		it.ResetBytes(value)
		components(it)
		if it.WhatIsNext(); it.Error == io.EOF {
			it.Error = nil
		} else {
			clear(d.raw) // not the document's own: read it whole
			it.Error = errNotLast
		}
	}
	if it.Error != nil || len(d.raw) == 0 {
		it.ResetBytes(b)
		it.Error = nil
		it.ReadObjectCB(field("components", components))
	}
	if it.Error != nil && it.Error != io.EOF {
		return nil, it.Error
	}
	for name, raw := range d.raw {
		if !bytes.Contains(raw, []byte(gvkExtension)) {
			continue
		}
		var declared struct {
			GVKs []schema.GroupVersionKind `json:"x-kubernetes-group-version-kind"`
		}
		if err := json.Unmarshal(raw, &declared); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		for _, gvk := range declared.GVKs {
			d.kinds[gvk] = name
		}
	}
	return d, nil
}

var errNotLast = errors.New("not the document's last value")

// lastValue returns what follows the first occurrence of key in a JSON
// object, up to the object's closing brace.
func lastValue(doc []byte, key string) ([]byte, bool) {
	i := bytes.Index(doc, []byte(key))
	end := bytes.LastIndexByte(doc, '}')
	if i < 0 || end < i+len(key) {
		return nil, false
	}
	return doc[i+len(key) : end], true
}

// reach returns the names of the schemas of the given kinds and of every
// schema they refer to, sorted. It returns all the document's schemas when a
// reference is written in a form it cannot follow (an escaped character, a
// name the document lacks): a converter missing a schema would merge that
// field as an unknown type.
func (d *schemaDoc) reach(gvks []schema.GroupVersionKind) []string {
	seen := map[string]bool{}
	var queue []string
	for _, gvk := range gvks {
		if name, ok := d.kinds[gvk]; ok && !seen[name] {
			seen[name] = true
			queue = append(queue, name)
		}
	}
	for len(queue) > 0 {
		raw := d.raw[queue[0]]
		queue = queue[1:]
		// Every reference must be followed: one written with escapes
		// (`\/`, `\u002f`) is not, and then every schema is taken.
		refs, followed := bytes.Count(raw, []byte(`"$ref"`)), 0
		if bytes.Contains(raw, []byte(`\u0024ref`)) {
			return d.all()
		}
		for rest := raw; ; {
			i := bytes.Index(rest, []byte(refPrefix))
			if i < 0 {
				break
			}
			rest = rest[i+len(refPrefix):]
			end := bytes.IndexByte(rest, '"')
			if end < 0 {
				return d.all()
			}
			name := string(rest[:end])
			if _, ok := d.raw[name]; !ok {
				return d.all()
			}
			followed++
			if !seen[name] {
				seen[name] = true
				queue = append(queue, name)
			}
		}
		if followed != refs {
			return d.all()
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func (d *schemaDoc) all() []string { return slices.Sorted(maps.Keys(d.raw)) }

// schemas parses the named schemas, each once. The caller holds the
// reader's lock.
func (d *schemaDoc) schemas(names []string, into map[string]*spec.Schema) error {
	for _, name := range names {
		s, ok := d.parsed[name]
		if !ok {
			s = new(spec.Schema)
			if err := s.UnmarshalJSON(d.raw[name]); err != nil {
				return fmt.Errorf("schema %s: %w", name, err)
			}
			d.parsed[name] = s
		}
		into[name] = s
	}
	return nil
}
