"""rrpc_dependencies - what a workspace that depends on @rrpc must also define.

In the depending workspace's WORKSPACE (docs/building.md, "Bazel"):

    local_repository(name = "rrpc", path = "/path/to/rrpc")
    load("@rrpc//third_party/bazel:deps.bzl", "rrpc_dependencies")
    rrpc_dependencies("/path/to/rrpc")

It adds @system (Debian's libraries under /usr, which rrpc's BUILD links) and,
unless the workspace has its own, the offline stand-ins for the rule
repositories Bazel 4 asks for (third_party/bazel/README.md).
"""

def rrpc_dependencies(rrpc_path):
    """Defines @system and the offline stand-ins; rrpc_path as given to local_repository."""
    for name in ["rules_cc", "rules_java", "remote_coverage_tools"]:
        if name not in native.existing_rules():
            native.local_repository(
                name = name,
                path = rrpc_path + "/third_party/bazel/" + name,
            )
    if "system" not in native.existing_rules():
        native.new_local_repository(
            name = "system",
            build_file = "@rrpc//third_party/bazel:system.BUILD",
            path = "/usr",
        )
