package kubetest

// DefaultingCRD is a CustomResourceDefinition whose structural schema
// defaults fields at every level: a whole object, scalars, the items of an
// atomic list and the values of a map. GROUP stands for the API group.
const DefaultingCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.GROUP
spec:
  group: GROUP
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            default: {}
            properties:
              replicas: {type: integer, default: 1}
              mode: {type: string, default: fast}
              ports:
                type: array
                items:
                  type: object
                  properties:
                    port: {type: integer}
                    protocol: {type: string, default: TCP}
              limits:
                type: object
                default: {cpu: "1"}
                properties:
                  cpu: {type: string}
              opts:
                type: object
                additionalProperties:
                  type: object
                  properties:
                    level: {type: integer, default: 3}
`
