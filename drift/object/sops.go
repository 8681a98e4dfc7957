package object

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// SOPSNote explains an encrypted object's live comparison.
const SOPSNote = "encrypted with SOPS in Git: compared by its encrypted content (which keys changed), never decrypted; whether the live values differ is not known"

// SOPSEncrypted reports whether o carries SOPS metadata: a top-level sops
// field with a message authentication code, as SOPS writes it.
func SOPSEncrypted(o *unstructured.Unstructured) bool {
	m, ok := o.Object["sops"].(map[string]any)
	if !ok {
		return false
	}
	_, mac := m["mac"]
	return mac
}

// MaskSOPS prepares an encrypted object for comparison: the SOPS metadata
// goes (it changes on every edit), and each encrypted value becomes a short
// digest of its ciphertext, so an edited key shows as changed without a
// byte of ciphertext, let alone plaintext, in the report.
func MaskSOPS(o *unstructured.Unstructured) {
	delete(o.Object, "sops")
	o.Object = maskEncrypted(o.Object).(map[string]any)
}

func maskEncrypted(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = maskEncrypted(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = maskEncrypted(e)
		}
		return x
	case string:
		if strings.HasPrefix(x, "ENC[") {
			sum := sha256.Sum256([]byte(x))
			return "(encrypted " + hex.EncodeToString(sum[:4]) + ")"
		}
		return x
	}
	return v
}
