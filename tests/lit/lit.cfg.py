# lit configuration of the transfuse IR and driver tests.
# Substitutions: %models (the models/ folder); tools found on PATH:
# transfuse, transfuse-opt, FileCheck, not, count, split-file;
# %artifact_flags: the build's sanitizer flags, for programs a test links
# against an artifact (empty in a plain build). Feature `cuda`: this build
# found nvcc and can compile --target cuda.
import os

import lit.formats

config.name = "transfuse"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.transfuse_obj_root
config.environment["PATH"] = os.pathsep.join(
    [config.transfuse_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%models", os.path.join(config.transfuse_src_root, "models")))
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%onnx_python", config.onnx_python))
config.substitutions.append(("%examples", os.path.join(config.transfuse_src_root, "examples")))
config.substitutions.append(("%oracle", os.path.join(config.transfuse_src_root, "tests", "oracle")))
config.substitutions.append(("%artifact_flags", config.artifact_flags))
if config.cuda_lib:
    config.available_features.add("cuda")
