# The mapping from Zephyr's CONFIG_ variables to the arguments of spattn's
# Makefile, kept apart from zephyr/CMakeLists.txt so that it can be run
# without Zephyr (tests/zephyr/check.sh feeds it CONFIG_ values by hand).
# It reads only variables and touches no file, target or Zephyr function.

# The operators of each Kconfig family, in mk/ops.mk's order (ALL_OPS), so
# that OPS is the same string whatever order the options were chosen in.
# check.sh compares their union with mk/ops.mk, so an op added there and
# forgotten here fails the check.
set(SPATTN_OPS_MSDA msda)
set(SPATTN_OPS_MSDA_GRAD msda_grad)
set(SPATTN_OPS_NSA_TRAINING nsa_compress nsa_compress_attention nsa_select swa)
set(SPATTN_OPS_NSA_TRAINING_GRAD nsa_compress_grad nsa_compress_attention_grad nsa_select_grad swa_grad)
set(SPATTN_OPS_NSA_INFERENCE nsa_select_infer nsa_compress_attention_infer nsa_compress_with_cache)
set(SPATTN_OPS_DSA dsa_lightning_indexer dsa_sparse_attention)
set(SPATTN_OPS_DSA_GRAD dsa_sparse_attention_grad dsa_lightning_indexer_grad)
set(SPATTN_ALL_OPS msda msda_grad nsa_compress nsa_compress_grad nsa_compress_attention
  nsa_compress_attention_grad nsa_select nsa_select_grad swa swa_grad nsa_select_infer
  nsa_compress_attention_infer nsa_compress_with_cache dsa_lightning_indexer
  dsa_sparse_attention dsa_sparse_attention_grad dsa_lightning_indexer_grad)

# spattn_make_args(<prefix>): sets <prefix>_TARGET, <prefix>_OPS,
# <prefix>_DTYPES (space-separated, as make takes them) and
# <prefix>_REASONS in the caller's scope, or stops the configuration with
# FATAL_ERROR when this configuration has no spattn target: a wrong core or
# ABI would otherwise only show up as a link error or a fault at run time.
function(spattn_make_args prefix)
  # The core. The Kconfig menu already depends on these; checking again
  # here gives a clear message when CONFIG_SPATTN is forced some other way.
  if(NOT CONFIG_FPU)
    message(FATAL_ERROR
      "spattn: CONFIG_FPU is not set. spattn is built only for cores with "
      "a hardware FPU (Cortex-M55 with Helium floating point, Cortex-M7 with "
      "the double-precision FPU); enable CONFIG_FPU or disable CONFIG_SPATTN.")
  endif()
  if(CONFIG_CPU_CORTEX_M55)
    if(NOT CONFIG_ARMV8_1_M_MVEF)
      message(FATAL_ERROR
        "spattn: this Cortex-M55 has no Helium floating point "
        "(CONFIG_ARMV8_1_M_MVEF unset); spattn's cortex-m55 kernels are "
        "MVE-F code and there is no target without it.")
    endif()
    set(target cortex-m55)
  elseif(CONFIG_CPU_CORTEX_M7)
    if(NOT CONFIG_CPU_HAS_FPU_DOUBLE_PRECISION)
      message(FATAL_ERROR
        "spattn: this Cortex-M7 has a single-precision FPU "
        "(CONFIG_CPU_HAS_FPU_DOUBLE_PRECISION unset); spattn's cortex-m7 "
        "target is built for fpv5-d16 and uses double-precision instructions.")
    endif()
    set(target cortex-m7)
  else()
    message(FATAL_ERROR
      "spattn: no target for this CPU; spattn's Zephyr module supports "
      "Cortex-M55 (CONFIG_CPU_CORTEX_M55) and Cortex-M7 (CONFIG_CPU_CORTEX_M7).")
  endif()
  # The float ABI picks the variant: objects of the two ABIs cannot be
  # linked together.
  if(CONFIG_FP_SOFTABI)
    string(APPEND target -softfp)
  elseif(NOT CONFIG_FP_HARDABI)
    message(FATAL_ERROR
      "spattn: neither CONFIG_FP_HARDABI nor CONFIG_FP_SOFTABI is set; "
      "spattn has targets for those two float ABIs only.")
  endif()
  if(CONFIG_FP16_ALT)
    message(FATAL_ERROR
      "spattn: CONFIG_FP16_ALT is set; spattn's objects use the IEEE "
      "half-precision format and the linker refuses to mix the two.")
  endif()

  # The operators.
  set(wanted)
  foreach(family MSDA NSA_TRAINING)
    if(CONFIG_SPATTN_${family})
      list(APPEND wanted ${SPATTN_OPS_${family}})
      if(CONFIG_SPATTN_GRADIENTS)
        list(APPEND wanted ${SPATTN_OPS_${family}_GRAD})
      endif()
    endif()
  endforeach()
  if(CONFIG_SPATTN_NSA_INFERENCE)
    list(APPEND wanted ${SPATTN_OPS_NSA_INFERENCE})
  endif()
  if(CONFIG_SPATTN_DSA)
    list(APPEND wanted ${SPATTN_OPS_DSA})
    if(CONFIG_SPATTN_GRADIENTS)
      list(APPEND wanted ${SPATTN_OPS_DSA_GRAD})
    endif()
  endif()
  if(NOT wanted)
    # OPS= with nothing would build an archive of stubs only.
    message(FATAL_ERROR
      "spattn: CONFIG_SPATTN is set but no operator family is: enable "
      "CONFIG_SPATTN_MSDA, CONFIG_SPATTN_NSA_TRAINING, "
      "CONFIG_SPATTN_NSA_INFERENCE or CONFIG_SPATTN_DSA.")
  endif()
  set(ops)
  foreach(op IN LISTS SPATTN_ALL_OPS)
    list(FIND wanted ${op} at) # not IN_LIST: it needs policy CMP0057
    if(at GREATER -1)
      list(APPEND ops ${op})
    endif()
  endforeach()
  string(REPLACE ";" " " ops "${ops}")

  # The dtypes: f32 always (the Makefile requires it); f64 is never built
  # on Cortex-M.
  set(dtypes f32)
  if(CONFIG_SPATTN_FLOAT16)
    string(APPEND dtypes " f16")
  endif()
  if(CONFIG_SPATTN_BFLOAT16)
    string(APPEND dtypes " bf16")
  endif()

  if(CONFIG_SPATTN_REASONS)
    set(reasons 1)
  else()
    set(reasons 0)
  endif()

  set(${prefix}_TARGET "${target}" PARENT_SCOPE)
  set(${prefix}_OPS "${ops}" PARENT_SCOPE)
  set(${prefix}_DTYPES "${dtypes}" PARENT_SCOPE)
  set(${prefix}_REASONS "${reasons}" PARENT_SCOPE)
endfunction()
