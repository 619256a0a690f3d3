// The Tessel specification language.
//
// One grammar covers the whole `.model` file: imports, blocks, the model (dims, constants,
// forward function) and the `parallel` / `train` sections. Expressions are one language for
// dim arithmetic, tensor computations and setting values; semantic analysis decides what each
// expression means where it appears, so the grammar stays small and errors stay precise.
grammar Tessel;

file : item* EOF ;

item
  : importDecl
  | blockDecl
  | modelDecl
  | sectionDecl
  ;

importDecl : 'import' STRING ';'? ;

modelDecl : 'model' name=ID '{' modelItem* '}' ;

modelItem
  : dimsDecl
  | blockDecl
  | forwardDecl
  | constDecl
  ;

dimsDecl : 'dims' '{' (dimDef ','?)* '}' ;
dimDef : name=ID '=' expr ;
constDecl : name=ID '=' expr ';'? ;

blockDecl : 'block' name=ID '(' paramList? ')' '->' result=typeExpr body ;
forwardDecl : 'forward' '(' paramList? ')' '->' result=ID body ;

paramList : typedName (',' typedName)* ;
typedName : name=ID ':' typeExpr ;

// `[batch, seq, embed]` is f32; a dtype may precede the brackets: `i32[batch, seq]`.
typeExpr : dtype=ID? '[' (ID (',' ID)*)? ']' ;

body : '{' stmt* '}' ;

stmt
  : paramStmt
  | returnStmt
  | repeatStmt
  | assignStmt
  | callStmt
  ;

paramStmt : 'param' name=ID ':' typeExpr ('init' init=expr)? ';'? ;
returnStmt : 'return' expr ';'? ;
repeatStmt : 'repeat' count=expr body ;
assignStmt : name=ID '=' expr ';'? ;
// A call for its effect: `add_loss(aux)`.
callStmt : callee=ID '(' argList? ')' ';'? ;

// `parallel { ... }` and `train { ... }`: settings, possibly nested in groups.
sectionDecl : kind=('parallel' | 'train') '{' setting* '}' ;
setting
  : key=ID '=' expr ','? ';'?          # valueSetting
  | key=ID '{' setting* '}' ','? ';'?  # groupSetting
  ;

// Precedence, tightest first: call/primary, unary minus, * / // % @, + -, comparisons.
// Comparisons do not chain (`a < b < c` is refused when the tree is built).
expr
  : primary                                        # primaryExpr
  | op='-' expr                                    # negExpr
  | lhs=expr op=('*' | '/' | '//' | '%' | '@') rhs=expr  # mulExpr
  | lhs=expr op=('+' | '-') rhs=expr               # addExpr
  | lhs=expr op=('<' | '<=' | '>' | '>=' | '==' | '!=') rhs=expr  # compareExpr
  ;

primary
  : NUMBER                                         # numberLit
  | STRING                                         # stringLit
  | callee=ID '(' argList? ')'                     # callExpr
  | ID                                             # nameRef
  | '(' expr (tupleComma=',' (expr (',' expr)*)?)? ')'  # parenExpr
  | '[' (expr (',' expr)*)? ']'                    # listExpr
  ;

argList : arg (',' arg)* ;
arg : (key=ID '=')? expr ;

// Keywords are listed so that the lexer gives them their own token types.
IMPORT : 'import' ;
MODEL : 'model' ;
DIMS : 'dims' ;
BLOCK : 'block' ;
FORWARD : 'forward' ;
PARAM : 'param' ;
INIT : 'init' ;
RETURN : 'return' ;
REPEAT : 'repeat' ;
PARALLEL : 'parallel' ;
TRAIN : 'train' ;

ID : [a-zA-Z_] [a-zA-Z_0-9]* ;

// A number: digits, an optional fraction and exponent, and an optional suffix of letters
// (`25MB`, `10K`, or a name that starts with a digit such as the schedule `1f1b`).
// Semantic analysis reads the suffix.
NUMBER : DIGITS ('.' DIGITS)? ([eE] [+-]? DIGITS)? [a-zA-Z_] [a-zA-Z_0-9]*
       | DIGITS ('.' DIGITS)? ([eE] [+-]? DIGITS)?
       | '.' DIGITS ([eE] [+-]? DIGITS)?
       ;
fragment DIGITS : [0-9]+ ;

STRING : '"' (~["\\\r\n] | '\\' ~[\r\n])* '"' ;

COMMENT : '#' ~[\r\n]* -> skip ;
WS : [ \t\r\n]+ -> skip ;

// Any other character becomes a token of its own so the parser reports it where it is.
UNKNOWN : . ;
