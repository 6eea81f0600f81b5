package server

import (
	"fmt"
	"slices"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/server/auth"
)

// methodScopes maps every method registered on srv to the scope its
// (metadata.v1.required_scope) option declares, so that the API documents
// its own permissions and a new RPC without one stops the server from
// starting. Health is open to anyone; reflection needs metadata.read unless
// openReflection. The descriptors come from files, the global registry but
// in tests, which must not register services of their own there.
func methodScopes(services map[string]grpc.ServiceInfo, openReflection bool, files descriptors) (map[string]string, error) {
	reflectionScope := auth.ScopeRead
	if openReflection {
		reflectionScope = auth.Open
	}
	fixed := map[string]string{
		healthpb.Health_ServiceDesc.ServiceName:                    auth.Open,
		reflectionv1.ServerReflection_ServiceDesc.ServiceName:      reflectionScope,
		reflectionv1alpha.ServerReflection_ServiceDesc.ServiceName: reflectionScope,
	}
	scopes := map[string]string{}
	for name, info := range services {
		for _, m := range info.Methods {
			full := "/" + name + "/" + m.Name
			if scope, ok := fixed[name]; ok {
				scopes[full] = scope
				continue
			}
			scope, err := declaredScope(files, name, m.Name)
			if err != nil {
				return nil, err
			}
			scopes[full] = scope
		}
	}
	return scopes, nil
}

// descriptors finds the descriptors of services, as *protoregistry.Files does.
type descriptors interface {
	FindDescriptorByName(protoreflect.FullName) (protoreflect.Descriptor, error)
}

// declaredScope reads the required_scope option of one method.
func declaredScope(files descriptors, service, method string) (string, error) {
	d, err := files.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return "", fmt.Errorf("server: service %s has no descriptor to read scopes from: %w", service, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return "", fmt.Errorf("server: %s is not a service", service)
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return "", fmt.Errorf("server: service %s has no method %s in its descriptor", service, method)
	}
	scope, _ := proto.GetExtension(md.Options(), metadatav1.E_RequiredScope).(string)
	if scope == "" {
		return "", fmt.Errorf("server: /%s/%s declares no (metadata.v1.required_scope) option; every RPC must", service, method)
	}
	if !slices.Contains(auth.Scopes, scope) {
		return "", fmt.Errorf("server: /%s/%s requires unknown scope %q", service, method, scope)
	}
	return scope, nil
}
