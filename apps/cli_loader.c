/* The loader options of dump, check and bench, defined once over a
 * slabfeed_config (see cli.h). Range checks beyond the type of each field
 * are the library's: slabfeed_open reports them on every rank alike. */
#include "cli.h"

/* Enums are stored through an int (CLI_ENUM). */
_Static_assert(sizeof(slabfeed_file_layout) == sizeof(int), "enum size");
_Static_assert(sizeof(slabfeed_symmetries) == sizeof(int), "enum size");
_Static_assert(sizeof(slabfeed_dtype) == sizeof(int), "enum size");
_Static_assert(sizeof(slabfeed_out_layout) == sizeof(int), "enum size");

static const cli_choice layouts[] = {{"auto", SLABFEED_LAYOUT_AUTO},
                                     {"cf", SLABFEED_LAYOUT_CF},
                                     {"cl", SLABFEED_LAYOUT_CL},
                                     {NULL, 0}};
static const cli_choice symmetries[] = {{"all", SLABFEED_SYM_ALL},
                                        {"rotations", SLABFEED_SYM_ROTATIONS},
                                        {"none", SLABFEED_SYM_NONE},
                                        {NULL, 0}};
static const cli_choice dtypes[] = {{"f32", SLABFEED_DTYPE_F32},
                                    {"f16", SLABFEED_DTYPE_F16},
                                    {"bf16", SLABFEED_DTYPE_BF16},
                                    {NULL, 0}};
static const cli_choice out_layouts[] = {
    {"ncdhw", SLABFEED_OUT_NCDHW}, {"ndhwc", SLABFEED_OUT_NDHWC}, {NULL, 0}};

#define CFG(field) offsetof(slabfeed_config, field)

const cli_option cli_loader_options[] = {
    {.name = "--file",
     .kind = CLI_STRING,
     .at = CFG(path),
     .metavar = "F",
     .help = "the HDF5 volume",
     .flags = CLI_REQUIRED},
    {.name = "--input",
     .kind = CLI_STRING,
     .at = CFG(input),
     .metavar = "NAME",
     .help = "input dataset",
     .flags = CLI_REQUIRED},
    {.name = "--target",
     .kind = CLI_STRING,
     .at = CFG(target),
     .metavar = "NAME",
     .help = "target dataset (default: none)"},
    {.name = "--layout",
     .kind = CLI_ENUM,
     .at = CFG(layout),
     .choices = layouts,
     .help = "file layout of both datasets: channels-first, channels-last, "
             "or decided from the shape"},
    {.name = "--crop",
     .kind = CLI_TRIPLE,
     .at = CFG(crop),
     .metavar = "C",
     .help = "crop edge: C or Z,Y,X"},
    {.name = "--batch",
     .kind = CLI_INT,
     .at = CFG(batch),
     .metavar = "B",
     .help = "samples per rank and step"},
    {.name = "--seed",
     .kind = CLI_U64,
     .at = CFG(seed),
     .metavar = "S",
     .help = "sampler seed"},
    {.name = "--symmetries",
     .kind = CLI_ENUM,
     .at = CFG(symmetries),
     .choices = symmetries,
     .help = "cube symmetries drawn: all 48, the 24 rotations, or none"},
    {.name = "--input-vector",
     .kind = CLI_VECTOR,
     .at = CFG(input_vectors),
     .count_at = CFG(n_input_vectors),
     .max = SLABFEED_MAX_VECTORS,
     .metavar = "K0,K1,K2",
     .help = "input channels of one vector (components along z,y,x); "
             "repeatable"},
    {.name = "--target-vector",
     .kind = CLI_VECTOR,
     .at = CFG(target_vectors),
     .count_at = CFG(n_target_vectors),
     .max = SLABFEED_MAX_VECTORS,
     .metavar = "K0,K1,K2",
     .help = "target channels of one vector; repeatable"},
    {.name = "--dtype",
     .kind = CLI_ENUM,
     .at = CFG(dtype),
     .choices = dtypes,
     .help = "element type of the batches"},
    {.name = "--out-layout",
     .kind = CLI_ENUM,
     .at = CFG(out_layout),
     .choices = out_layouts,
     .help = "memory layout of the batches"},
    {.name = "--device",
     .kind = CLI_INT,
     .at = CFG(device),
     .metavar = "-1|N",
     .help = "CUDA device of the batches, -1 for host batches"},
    {.name = "--halo",
     .kind = CLI_INT,
     .at = CFG(halo),
     .metavar = "H",
     .help = "z-planes copied on each side of the slab"},
    {.name = "--prefetch",
     .kind = CLI_INT,
     .at = CFG(prefetch),
     .metavar = "K",
     .help = "batches in the ring"},
    {.name = "--rank-per-node",
     .kind = CLI_FLAG,
     .at = CFG(rank_per_node),
     .help = "treat every rank as its own node (remote pieces travel with "
             "MPI_Get)"},
    {.name = "--group-nodes",
     .kind = CLI_INT,
     .at = CFG(group_nodes),
     .metavar = "G",
     .help = "nodes per replication group: 0 the smallest that fits "
             "--node-memory (default), -1 all nodes, or G"},
    {.name = "--node-memory",
     .kind = CLI_SIZE,
     .at = CFG(node_memory),
     .metavar = "BYTES",
     .help = "slab store one node may hold, e.g. 200G (default: half the "
             "node's memory less 2 GiB per rank)"},
    {.name = "--locality",
     .kind = CLI_FLAG,
     .at = CFG(locality),
     .help = "draw crop origins in the z-range of the rank's node: no crop "
             "byte crosses nodes"},
    {.name = NULL}};
