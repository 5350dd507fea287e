# cmake [-DCONFIG_...=y ...] -P mapping.cmake: runs the module's CONFIG_ ->
# make-arguments mapping on the CONFIG_ values given, as Zephyr's Kconfig
# would set them (y, or not defined), and prints the result on one line for
# check.sh to compare. A configuration without a target stops in
# spattn_make_args with FATAL_ERROR, which check.sh expects for those cases.
cmake_minimum_required(VERSION 3.20) # Zephyr's own minimum
include(${CMAKE_CURRENT_LIST_DIR}/../../zephyr/spattn_config.cmake)
spattn_make_args(SPATTN)
message(STATUS "TARGET=${SPATTN_TARGET} | OPS=${SPATTN_OPS} | DTYPES=${SPATTN_DTYPES} | REASONS=${SPATTN_REASONS}")
