/* spattn: umbrella header. */
#ifndef SPATTN_H
#define SPATTN_H
#include "spattn/types.h"
#include "spattn/nsa.h"
#include "spattn/nsa_infer.h"
#include "spattn/msda.h"
#include "spattn/executor.h"
#include "spattn/nsa_compress_attention.h"
#include "spattn/swa.h"
#include "spattn/dsa.h"
#endif
