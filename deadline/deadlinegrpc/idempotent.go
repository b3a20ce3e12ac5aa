package deadlinegrpc

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// IsIdempotent reports whether the method's descriptor, looked up by its
// full method name ("/pkg.Service/Method") in files (nil:
// protoregistry.GlobalFiles), declares it safe to repeat: its
// google.protobuf.MethodOptions.idempotency_level is NO_SIDE_EFFECTS or
// IDEMPOTENT. It reports false for a method that is not registered, a name
// that is not a full method name, and IDEMPOTENCY_UNKNOWN (the default).
func IsIdempotent(files *protoregistry.Files, method string) bool {
	if files == nil {
		files = protoregistry.GlobalFiles
	}
	if !validMethod(method) {
		return false
	}
	// "/pkg.Service/Method" is the descriptor "pkg.Service.Method".
	name := protoreflect.FullName(strings.Replace(method[1:], "/", ".", 1))
	d, err := files.FindDescriptorByName(name)
	if err != nil {
		return false
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return false
	}
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok || opts == nil {
		return false
	}
	switch opts.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS, descriptorpb.MethodOptions_IDEMPOTENT:
		return true
	}
	return false
}
