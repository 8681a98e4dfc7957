package object_test

import (
	"testing"

	"github.com/driftback/driftback/drift/object"
	"github.com/driftback/driftback/internal/testfs"
)

// TestSecretMakerOnlyWhereTheOperatorCreatesIt: an operator's object names
// the Secret it creates, in its namespace; one that only writes into an
// existing Secret (creationPolicy Merge, a Vault destination without
// create) makes none.
func TestSecretMakerOnlyWhereTheOperatorCreatesIt(t *testing.T) {
	objs := testfs.Objects(t,
		"apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: db, namespace: shop}\nspec: {target: {name: db-creds}}\n",
		"apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: own, namespace: shop}\nspec: {}\n",
		"apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: merged, namespace: shop}\nspec: {target: {name: merged, creationPolicy: Merge}}\n",
		"apiVersion: bitnami.com/v1alpha1\nkind: SealedSecret\nmetadata: {name: sealed, namespace: shop}\n",
		"apiVersion: secrets.hashicorp.com/v1beta1\nkind: VaultStaticSecret\nmetadata: {name: v1, namespace: shop}\nspec: {destination: {name: vault-made, create: true}}\n",
		"apiVersion: secrets.hashicorp.com/v1beta1\nkind: VaultStaticSecret\nmetadata: {name: v2, namespace: shop}\nspec: {destination: {name: vault-existing}}\n",
		"apiVersion: bitnami.com/v1alpha1\nkind: SealedSecret\nmetadata: {name: elsewhere, namespace: billing}\n")
	for name, want := range map[string]string{
		"db-creds": "ExternalSecret shop/db", "own": "ExternalSecret shop/own", "merged": "",
		"sealed": "SealedSecret shop/sealed", "vault-made": "VaultStaticSecret shop/v1", "vault-existing": "", "elsewhere": "",
	} {
		if got := object.SecretMaker(objs, "shop", name); got != want {
			t.Errorf("Secret shop/%s: made by %q, want %q", name, got, want)
		}
	}
}
