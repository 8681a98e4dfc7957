package object

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
)

func BuiltinTypeConverter() managedfields.TypeConverter {
	builtinOnce.Do(func() {
		builtin = &fallbackConverter{
			primary: applyconfigurations.NewTypeConverter(BuiltinScheme()),
			deduced: managedfields.NewDeducedTypeConverter(),
		}
	})
	return builtin
}

// builtin is the schema of the built-in kinds, built once: it never changes.
var (
	builtinOnce sync.Once
	builtin     *fallbackConverter
)

// DeducedTypes reads any object by what it holds, without a schema.
var DeducedTypes = managedfields.NewDeducedTypeConverter()
